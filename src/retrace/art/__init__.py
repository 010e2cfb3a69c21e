"""ART (Paranjape et al. 2023): task library, program grammar, pause/resume runner, stages."""
