"""Scoring helpers for methods that select one sample (RM@N, beam, lookahead search).

    from retrace.scoring.selection import chosen_correct, row_compute
    chosen_correct(row, problem, task)   # True/False: is samples[extra["chosen"]] right? None: no choice
    row_compute(row, policy_params)      # tokens and FLOPs of every call the row cost

These rows carry `extra["chosen"]`, the index of the selected sample, and
`extra["compute"]` = {"policy": tokens, "scorer": tokens}, because their samples are not
their whole cost (scoring calls; search candidates that were pruned). `extra["scorer"]`
names the scorer (name, model fingerprint, params) that produced `extra["scores"]`.
FLOPs use 2 × params per token, as retrace.scoring.score does (Kaplan et al. 2020).
"""

from __future__ import annotations

from typing import Any

from retrace.records import Problem
from retrace.scoring.score import safe_extract


def chosen_correct(row: dict, problem: Problem, task: Any) -> bool | None:
    """Correctness of the selected sample, or None when the row selects none."""
    chosen = (row.get("extra") or {}).get("chosen")
    if chosen is None:
        return None
    answer, _ = safe_extract(task, row["samples"][int(chosen)].get("text"), problem)
    return answer is not None and bool(task.is_correct(answer, problem))


def sample_tokens(row: dict) -> dict:
    keys = ("prompt_tokens", "cached_prompt_tokens", "generated_tokens")
    return {
        "requests": len(row["samples"]),
        **{k: sum(int(s.get(k, 0)) for s in row["samples"]) for k in keys},
    }


def row_compute(row: dict, policy_params: int) -> dict:
    """Tokens and FLOPs (nominal, effective) of one row, policy and scorer apart.

    Rows without `extra["compute"]` cost what their samples cost. A scorer without a
    known parameter count (None) contributes tokens but no FLOPs, and says so.
    """
    compute = (row.get("extra") or {}).get("compute") or {"policy": sample_tokens(row)}
    scorer_params = ((row.get("extra") or {}).get("scorer") or {}).get("params")
    out = {}
    for part, params in (("policy", policy_params), ("scorer", scorer_params)):
        t = compute.get(part)
        if not t:
            continue
        flops = (
            None
            if params is None
            else {
                "nominal": 2 * params * (t["prompt_tokens"] + t["generated_tokens"]),
                "effective": 2
                * params
                * (t["prompt_tokens"] - t["cached_prompt_tokens"] + t["generated_tokens"]),
            }
        )
        out[part] = {**t, "params": params, "flops": flops}
    return out
