"""What the claims stage must know of a run besides its scores, decided before any is read.

    deterministic_by_design(job_cfg)    # temperature 0: its seeds are one draw (seed 0 counts)
    subset_label(limit, questions)      # "full" or "limit=20" (claims.csv `subset`)
    mark_subset(row, "limit=20")        # the row's subset, and its verdict marked as a subset's
    check_finite({qid: score}, path)    # a NaN or infinite score: one line naming file and question

stages/score.py records the first two in every score record (with the engine that ran);
stages/claims.py and scoring/claims.py read them (docs/claims.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

FULL = "full"  # claims.csv `subset` of a run on every question of its datasets


def check_finite(scores: Mapping[str, float], where: str) -> None:
    """Refuse a NaN or infinite score with one line naming `where` (the file) and the question:
    a NaN difference would read as p ~ 0 and take the smallest Holm slot."""
    for q, v in scores.items():
        if not math.isfinite(float(v)):
            raise ValueError(f"{where}: question {q!r} has a non-finite score ({v}); refused")


def deterministic_by_design(cfg: Mapping) -> bool:
    """Whether a composed job config's seeds are one draw (its seed 0 counts, once): a
    temperature-0 method (greedy, or sampling.temperature 0). Read from the config before any
    score is. The engine's `deterministic` setting (the score record's `bitwise_repeatable`)
    says whether the other seeds must be identical copies (scoring.claims.counted_seeds): either
    way they are not independent draws, and averaging near-copies would skew the null."""
    method = cfg["method"]
    return method["name"] == "greedy" or method["sampling"]["temperature"] == 0


def subset_label(limit, questions) -> str:
    """claims.csv `subset`: FULL, or "limit=N" when a dataset yields N of its `questions`."""
    if limit in (None, "") or (questions and int(limit) >= int(questions)):
        return FULL
    return f"limit={int(limit)}"


def mark_subset(row: dict, subset: str) -> dict:
    """Set a row's `subset`; a subset's verdict is marked as such in its note (the claim was
    not judged on every question; running at growing limits is optional stopping)."""
    row["subset"] = subset or FULL
    if row["subset"] != FULL:
        mark = f"verdict on a subset ({row['subset']}), not the full dataset"
        row["note"] = "; ".join(filter(None, [row.get("note") or "", mark]))
    return row
