"""Refinement diagnostics JSONs -> loaded records and flat per-depth rows for the report.

A diagnostics file is {"job": {"model", "dataset", "method", "seed", ...}, "depths": [...]},
"depths" being `scoring.refine_diagnostics.diagnose`'s per-depth list (or its whole dict,
which holds that list). Like a score file, it must have a provenance record beside it; each
row carries that record's sha256.

    diags = load_diagnostics(paths)        # [{"job", "depths", "file", "prov_sha256"}, ...]
    rows = diagnostic_rows(diags)          # one per job per depth
    extraction_rows(result_rows)           # per job, the share of answers found by each path
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from retrace.report.plots import depth_records
from retrace.report.tables import IDENTITY, load_job_json, sort_key
from retrace.tasks.base import SOURCES

ROW_KEYS = (
    "accuracy",
    "rollout_accuracy",
    "recovery_rate",
    "regression_rate",
    "recovered",
    "regressed",
    "benefit",
    "diversity",
)


def load_diagnostic(path: Path) -> dict:
    """One diagnostics file with its per-depth list, file name and provenance hash."""
    data, record_sha = load_job_json(path, "diagnostics")
    return {
        "job": data["job"],
        "depths": depth_records(data),
        "grid": data.get("grid") or [],
        "file": str(path),
        "prov_sha256": record_sha,
    }


def load_diagnostics(paths: Iterable[Path]) -> list[dict]:
    """Every file's record, sorted by dataset, model, method, seed."""
    diags = [load_diagnostic(Path(p)) for p in paths]
    return sorted(diags, key=lambda d: sort_key(d["job"]))


def diagnostic_rows(diags: list[dict]) -> list[dict]:
    """One row per job per depth; flip columns are None at depth 0, where nothing flipped."""
    return [
        {
            **{k: d["job"][k] for k in IDENTITY},
            "depth": rec["depth"],
            **{k: rec.get(k) for k in ROW_KEYS},
            "file": d["file"],
            "prov_sha256": d["prov_sha256"],
        }
        for d in diags
        for rec in d["depths"]
    ]


def grid_tables(diags: list[dict]) -> list[dict]:
    """Per refine job, the N × D accuracy table (the paper's Table 3) as rows of cells:
    a pivot of the job's grid cells, n down and depth across (None where a cell is absent)."""
    import pandas as pd

    tables = []
    for d in diags:
        if not d["grid"]:
            continue
        grid = pd.DataFrame(d["grid"]).pivot(index="n", columns="depth", values="accuracy")
        grid = grid.sort_index().sort_index(axis=1).astype(object).where(grid.notna(), None)
        tables.append(
            {
                **{k: d["job"][k] for k in IDENTITY},
                "depths": [int(k) for k in grid.columns],
                "rows": [{"n": int(n), "cells": list(cells)} for n, cells in zip(grid.index, grid.values)],
                "prov_sha256": d["prov_sha256"],
                "file": d["file"],
            }
        )
    return tables


def extraction_rows(rows: list[dict]) -> list[dict]:
    """Per job, the share of samples whose answer each extraction path found (box, statement,
    fallback, none; results.csv's answer_<source>_rate) and the rules behind them
    (answer_paths); jobs whose score has no such record are left out. docs/scoring.md."""
    out = []
    for r in rows:
        shares = {k: r.get(f"answer_{k}_rate") for k in SOURCES}
        if all(v in (None, "") for v in shares.values()):
            continue
        out.append(
            {
                **{k: r[k] for k in IDENTITY},
                **shares,
                "paths": r.get("answer_paths", ""),
                "prov_sha256": r["prov_sha256"],
            }
        )
    return out
