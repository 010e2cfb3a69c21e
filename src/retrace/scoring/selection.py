"""Scoring helpers for methods that select one sample (RM@N, beam, lookahead search).

    from retrace.scoring.selection import chosen_correct
    chosen_correct(row, problem, task)   # True/False: is samples[extra["chosen"]] right? None: no choice

These rows carry `extra["chosen"]`, the index of the selected sample, and
`extra["compute"]` = {"policy": tokens, "scorer": tokens}, because their samples are not
their whole cost (scoring calls; search candidates that were pruned). `extra["scorer"]`
names the scorer (name, model fingerprint, params) that produced `extra["scores"]`.
"""

from __future__ import annotations

from typing import Any

from retrace.scoring.score import safe_extract
from retrace.util.records import Problem


def chosen_correct(row: dict, problem: Problem, task: Any) -> bool | None:
    """Correctness of the selected sample, or None when the row selects none."""
    chosen = (row.get("extra") or {}).get("chosen")
    if chosen is None:
        return None
    answer, _ = safe_extract(task, row["samples"][int(chosen)].get("text"), problem)
    return answer is not None and bool(task.is_correct(answer, problem))
