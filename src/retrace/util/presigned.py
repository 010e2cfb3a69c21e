"""Workflow functions (a rule's input, params or resources) with their parameters stated once.

Snakemake reads such a function's parameters (`inspect.signature`, to pass it only the
arguments it names) at each call, for each job: a twentieth of planning a paper-scale grid
(benchmarks/planner_scale.py, issue 57). `presigned(f)` reads them once and tells Snakemake
through the hook its own helpers use (snakemake.common.overwrite_function_params, as in
snakemake.ioutils.subpath); on a Snakemake without the hook, `f` is returned as it is.

    from retrace.util.presigned import presigned
    rule x:
        input: presigned(lambda w: ...)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def presigned(func: F) -> F:
    """`func`, its parameters recorded for Snakemake (see the module docstring)."""
    try:
        from snakemake.common import overwrite_function_params
    except ImportError:  # another Snakemake: it reads the signature itself, as before
        return func
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func
