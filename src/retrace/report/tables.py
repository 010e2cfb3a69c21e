"""Score JSONs -> flat result rows, seed aggregates and `results.csv`.

A score file is the JSON written by the score stage: `score_generations`' dict plus
"job": {"model", "dataset", "method", "seed"}. Its provenance record `<file>.prov.json`
must exist; the row's `prov_sha256` is the sha256 of that record's bytes, so a reader
can check any number against the lineage `retrace audit` walks.
"""
from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path
from typing import Iterable

from retrace.atomic import atomic_open
from retrace.hashing import sha256_file
from retrace.provenance import prov_path
from retrace.scoring.score import RESULT_COLUMNS, result_columns

IDENTITY = ("model", "dataset", "method", "seed")
HEAD = (*IDENTITY, "n", "accuracy", "ci_low", "ci_high", "selection", "scorer")
TAIL = ("bitwise_repeatable", "prompt_tokens", "cached_prompt_tokens", "generated_tokens",
        "flops_nominal", "flops_effective", *RESULT_COLUMNS, "score_file", "prov_sha256")


def load_job_json(path: Path, kind: str = "score") -> tuple[dict, str]:
    """(a job's JSON artifact, sha256 of its provenance record); errors name the file.

    Used for score and diagnostics files alike: both must say which job they belong to and
    have a record, since every reported number must point at one."""
    data = json.loads(Path(path).read_text())
    job = data.get("job")
    if not isinstance(job, dict) or any(k not in job for k in IDENTITY):
        raise ValueError(f"{path}: {kind} JSON lacks job fields {IDENTITY}")
    record = prov_path(path)
    if not record.exists():
        raise FileNotFoundError(f"{path}: no provenance record {record}; "
                                "every reported number must point at one")
    return data, sha256_file(record)



def _by_k(metric: dict, prefix: str) -> dict[str, float]:
    """{"maj@1": v, ...} from {k: {"value": v}} or {k: v}; JSON makes the keys strings."""
    out = {}
    for k in sorted(metric, key=int):
        v = metric[k]
        out[f"{prefix}@{int(k)}"] = v["value"] if isinstance(v, dict) else v
    return out


def scorer_name(scorer: object) -> str:
    """The scorer's name from its identity dict (scoring/scorers.py); "" when none chose."""
    if isinstance(scorer, dict):
        return str(scorer.get("name", ""))
    return "" if scorer is None else str(scorer)


def result_row(path: Path) -> dict:
    """One flat row (identity, accuracy with CI, selection, maj@k, pass@k, tokens, FLOPs, hashes).

    Score files written before `selection` existed were all plurality votes.
    """
    score, prov_sha = load_job_json(path)
    acc, tok, flops = score["accuracy"], score["tokens"], score["flops"]
    return {
        **{k: score["job"][k] for k in IDENTITY},
        "n": score["n_problems"], "accuracy": acc["value"],
        "ci_low": acc["ci_low"], "ci_high": acc["ci_high"],
        "selection": score.get("selection") or "plurality vote",
        "scorer": scorer_name(score.get("scorer")),
        **_by_k(score.get("maj@k", {}), "maj"), **_by_k(score.get("pass@k", {}), "pass"),
        # Score files from before the deterministic mode existed were never made in it.
        "bitwise_repeatable": bool(score.get("bitwise_repeatable", False)),
        "prompt_tokens": tok["prompt"], "cached_prompt_tokens": tok["cached_prompt"],
        "generated_tokens": tok["generated"],
        "flops_nominal": flops["nominal"], "flops_effective": flops["effective"],
        **result_columns(score),  # answer provenance and budget (retrace.scoring.score)
        "score_file": str(path), "prov_sha256": prov_sha,
    }


def sort_key(row: dict) -> tuple:
    return tuple(str(row[k]) for k in ("dataset", "model", "method")) + (_seed_key(row["seed"]),)


def _seed_key(seed: object) -> tuple:
    # Numeric seeds sort numerically (2 before 10); anything else after, as text.
    try:
        return (0, int(seed), "")
    except (TypeError, ValueError):
        return (1, 0, str(seed))


def result_rows(score_files: Iterable[Path]) -> list[dict]:
    """Rows of every score file, sorted by dataset, model, method, seed; duplicates refused."""
    rows = sorted((result_row(Path(p)) for p in score_files), key=sort_key)
    seen: dict[tuple, str] = {}
    for row in rows:
        ident = tuple(str(row[k]) for k in IDENTITY)
        if ident in seen:
            raise ValueError(f"two score files for {ident}: {seen[ident]} and {row['score_file']}")
        seen[ident] = row["score_file"]
    return rows


def k_columns(rows: list[dict]) -> list[str]:
    """maj@k then pass@k columns present in any row, in increasing k."""
    cols = {c for r in rows for c in r if c.startswith(("maj@", "pass@"))}
    return sorted(cols, key=lambda c: (not c.startswith("maj@"), int(c.split("@")[1])))


def columns(rows: list[dict]) -> list[str]:
    return [*HEAD, *k_columns(rows), *TAIL]


def write_csv(path: Path, rows: list[dict]) -> None:
    """Write `rows` atomically; a metric a row lacks is left empty."""
    with atomic_open(path) as f:
        writer = csv.DictWriter(f, fieldnames=columns(rows), restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _mean_sd(values: list[float]) -> tuple[float, float]:
    # Sample sd (n - 1): seeds are a sample of the runs one could have made.
    return statistics.fmean(values), statistics.stdev(values)


def aggregate(members: list[dict]) -> dict:
    """Mean and sd of accuracy, mean tokens and FLOPs, over the seeds of one configuration."""
    acc_mean, acc_sd = _mean_sd([m["accuracy"] for m in members])
    first = members[0]
    return {"model": first["model"], "dataset": first["dataset"], "method": first["method"],
            "n_seeds": len(members), "seeds": [m["seed"] for m in members],
            "accuracy_mean": acc_mean, "accuracy_sd": acc_sd,
            "generated_tokens_mean": statistics.fmean(m["generated_tokens"] for m in members),
            "flops_effective_mean": statistics.fmean(m["flops_effective"] for m in members),
            "prov_sha256s": [m["prov_sha256"] for m in members]}


def seed_aggregates(rows: list[dict]) -> list[dict]:
    """One aggregate per (model, dataset, method) that has two or more seeds, in row order."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["dataset"], row["method"]), []).append(row)
    return [aggregate(members) for members in groups.values() if len(members) >= 2]
