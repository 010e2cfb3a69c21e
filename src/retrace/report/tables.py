"""Score JSONs -> flat result rows, seed aggregates and `results.csv`.

A score file is the JSON written by the score stage: `score_generations`' dict plus
"job": {"model", "dataset", "method", "seed"}. Its provenance record `<file>.prov.json`
must exist; the row's `prov_sha256` is the sha256 of that record's bytes, so a reader
can check any number against the lineage `retrace audit` walks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrace.scoring.score import RESULT_COLUMNS, result_columns
from retrace.store.provenance import prov_path
from retrace.util.atomic import atomic_open
from retrace.util.hashing import sha256_file

if TYPE_CHECKING:  # for the annotations only: pandas is imported lazily where a frame is built
    import pandas as pd

IDENTITY = ("model", "dataset", "method", "seed")
HEAD = (*IDENTITY, "n", "accuracy", "ci_low", "ci_high", "selection", "scorer")
TAIL = (
    "bitwise_repeatable",
    "prompt_tokens",
    "cached_prompt_tokens",
    "generated_tokens",
    "flops_nominal",
    "flops_effective",
    *RESULT_COLUMNS,
    "score_file",
    "prov_sha256",
)


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
        raise FileNotFoundError(
            f"{path}: no provenance record {record}; every reported number must point at one"
        )
    return data, sha256_file(record)


def _by_k(metric: dict, prefix: str) -> dict[str, float]:
    """{"maj@1": v, ...} from {k: {"value": v}} or {k: v}; JSON makes the keys strings."""
    out = {}
    for k in sorted(metric, key=int):
        v = metric[k]
        out[f"{prefix}@{int(k)}"] = v["value"] if isinstance(v, dict) else v
    return out


def scorer_name(scorer: object) -> str:
    """The scorer's name from its identity dict (engine/scorers.py: every identity states its
    name); "" when none chose."""
    if isinstance(scorer, dict):
        return str(scorer["name"])
    return "" if scorer is None else str(scorer)


def result_row(path: Path) -> dict:
    """One flat row (identity, accuracy with CI, selection, maj@k, pass@k, tokens, FLOPs, hashes).

    Score files written before `selection` existed were all plurality votes.
    """
    score, prov_sha = load_job_json(path)
    acc, tok, flops = score["accuracy"], score["tokens"], score["flops"]
    return {
        **{k: score["job"][k] for k in IDENTITY},
        "n": score["n_problems"],
        "accuracy": acc["value"],
        "ci_low": acc["ci_low"],
        "ci_high": acc["ci_high"],
        "selection": score.get("selection") or "plurality vote",
        "scorer": scorer_name(score.get("scorer")),
        **_by_k(score.get("maj@k", {}), "maj"),
        **_by_k(score.get("pass@k", {}), "pass"),
        # Score files from before the deterministic mode existed were never made in it.
        "bitwise_repeatable": bool(score.get("bitwise_repeatable", False)),
        "prompt_tokens": tok["prompt"],
        "cached_prompt_tokens": tok["cached_prompt"],
        "generated_tokens": tok["generated"],
        "flops_nominal": flops["nominal"],
        "flops_effective": flops["effective"],
        **result_columns(score),  # answer provenance and budget (retrace.scoring.score)
        "score_file": str(path),
        "prov_sha256": prov_sha,
    }


def sort_key(row: dict) -> tuple:
    return tuple(str(row[k]) for k in ("dataset", "model", "method")) + (_seed_key(row["seed"]),)


def _seed_key(seed: Any) -> tuple:
    # Numeric seeds sort numerically (2 before 10); anything else after, as text.
    try:
        return (0, int(seed), "")
    except (TypeError, ValueError):
        return (1, 0, str(seed))


def result_frame(score_files: Iterable[Path]) -> pd.DataFrame:
    """One row per score file (object columns, so ints stay ints), sorted by dataset, model,
    method, seed; two files for one job are refused, naming both."""
    import pandas as pd

    rows = sorted((result_row(Path(p)) for p in score_files), key=sort_key)
    frame = pd.DataFrame(rows, dtype=object)
    if frame.empty:
        return frame
    ident = frame[list(IDENTITY)].astype(str)
    dup = ident.duplicated(keep=False)
    if dup.any():
        first, second = frame.loc[dup, "score_file"].iloc[:2]
        raise ValueError(f"two score files for {tuple(ident[dup].iloc[0])}: {first} and {second}")
    return frame


def records(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as dicts without the cells a row lacks (NaN), as the templates expect."""
    return [{k: v for k, v in row.items() if v is not None and v == v} for row in frame.to_dict("records")]


def result_rows(score_files: Iterable[Path]) -> list[dict]:
    """Rows of every score file, sorted by dataset, model, method, seed; duplicates refused."""
    return records(result_frame(score_files))


def k_columns(rows: list[dict]) -> list[str]:
    """maj@k then pass@k columns present in any row, in increasing k."""
    cols = {c for r in rows for c in r if c.startswith(("maj@", "pass@"))}
    return sorted(cols, key=lambda c: (not c.startswith("maj@"), int(c.split("@")[1])))


def extra_columns(rows: list[dict]) -> list[str]:
    """Keys some row has beyond HEAD, maj@k/pass@k and TAIL (e.g. a rate another stage adds),
    in order of first appearance: written to the CSV rather than dropped."""
    known = {*HEAD, *TAIL}
    return list(
        dict.fromkeys(c for r in rows for c in r if c not in known and not c.startswith(("maj@", "pass@")))
    )


def columns(rows: list[dict]) -> list[str]:
    return [*HEAD, *k_columns(rows), *extra_columns(rows), *TAIL]


def write_csv(path: Path, rows: list[dict]) -> None:
    """Write `rows` atomically; a metric a row lacks is left empty."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=columns(rows), dtype=object)
    with atomic_open(path) as f:
        frame.to_csv(f, index=False, lineterminator="\n")


def seed_aggregates(rows: list[dict]) -> list[dict]:
    """One aggregate per (model, dataset, method) with two or more seeds, in row order:
    mean and sample sd (n - 1: seeds sample the runs one could have made) of accuracy,
    mean generated tokens and effective FLOPs, the seeds and their records' hashes."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if frame.empty:
        return []
    frame["accuracy"] = frame["accuracy"].astype(float)
    agg = frame.groupby(["model", "dataset", "method"], sort=False).agg(
        n_seeds=("seed", "size"),
        seeds=("seed", list),
        accuracy_mean=("accuracy", "mean"),
        accuracy_sd=("accuracy", "std"),
        generated_tokens_mean=("generated_tokens", "mean"),
        flops_effective_mean=("flops_effective", "mean"),
        prov_sha256s=("prov_sha256", list),
    )
    return agg[agg["n_seeds"] >= 2].reset_index().to_dict("records")
