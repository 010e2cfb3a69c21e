"""retrace: re-run published LLM test-time reasoning methods and trace every number.

Run the default workflow with `make run`; the stages are `python -m retrace <stage>`.
"""

__version__ = "0.1.0"
