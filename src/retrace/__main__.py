"""`python -m retrace <stage> ...` — see retrace.cli."""
from retrace.cli import main

if __name__ == "__main__":  # vLLM's offline engine spawns workers: the guard is required.
    main()
