# Stage family ART (task library, tool-pausing programs); rules arrive with issue 5.
