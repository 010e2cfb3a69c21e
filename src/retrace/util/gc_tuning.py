"""CPython's cyclic garbage collector tuned for planning a large grid (the workflow's parse and DAG).

    from retrace.util.gc_tuning import for_planning
    for_planning()   # first thing in workflow/rules/common.smk

A dry run of a paper-scale grid builds millions of long-lived objects (Snakemake's jobs, their
files, params and resources; the plan's jobs and configs) and keeps them to the end. At the
default thresholds (700, 10, 10) the collector considers a full collection every tenth sweep of
its middle generation and runs one whenever the long-lived objects have grown by a quarter since
the last: about a dozen passes over everything while the DAG grows. Measured with gc.callbacks on
the 10x paper grid (benchmarks/planner_scale.py, issue 57): 3.6 of 20 CPU s in 11 full
collections; with the thresholds below, 0.4 s in 2. mypy tunes its collector for the same reason.

What this does not change: the collector still runs (reference cycles are still freed, in larger
batches, so a little more memory may wait for them); a collector someone disabled
(`gc.disable()`, or a first threshold of 0) stays disabled; thresholds already set higher are kept.
It applies to the Python process that parses the workflow (Snakemake's main process and each
cluster job's own Snakemake), not to the stages it starts (`python -m retrace …`).
"""

from __future__ import annotations

import gc

# young sweeps every 10,000 net allocations (not 700); full collections considered every 100th
# middle sweep (not 10th); the middle generation as it was
PLANNING = (10_000, 10, 100)


def for_planning() -> tuple[int, ...]:
    """Raise the collector's thresholds to PLANNING (each at least as high as before); return the
    thresholds as they were."""
    before = gc.get_threshold()
    if before[0] == 0:  # a first threshold of 0 disables automatic collection: someone chose that
        return before
    gc.set_threshold(*(max(old, new) for old, new in zip(before, PLANNING)))
    return before
