"""`python -m retrace <command> ...` — see retrace.cli."""

import sys

from retrace.cli import main

if __name__ == "__main__":  # vLLM's offline engine spawns workers: the guard is required.
    sys.exit(main())
