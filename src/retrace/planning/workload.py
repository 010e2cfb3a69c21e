"""What a job's size is read from: its dataset's problem count and the engine's measured decode
rate. Below retrace.planning.sizing and retrace.planning.estimate, which both use them (retrace.planning.estimate
re-exports each name).

    problem_count("math500", (), "/data/bench")             # 500 (its limit, or the file's count)
    probe_rate(Path("results/probe"), "qwen", "llamacpp")    # tok/s of the probe stage, or None
"""

from __future__ import annotations

import functools
import json
from pathlib import Path


@functools.cache
def problem_count(dataset: str, overrides: tuple, mirror: str | None) -> int | None:
    """Problems a dataset config yields (its limit, or the source file's count, or the config's
    stated `questions` where the file cannot be read; None: unknown)."""
    return problem_count_of(dataset, overrides, mirror)[0]


@functools.cache
def problem_count_of(dataset: str, overrides: tuple, mirror: str | None) -> tuple[int | None, bool]:
    """(problems, True when the count is the config's stated one: the data was not read). From a
    clone alone (no mirror) every dataset config states its `questions`, so nothing is sized 0."""
    from retrace.config.compose import compose
    from retrace.store.data import prepare

    cfg = compose({"dataset": dataset}, overrides)["dataset"]
    if cfg.get("source") != "hub":
        try:
            return len(prepare(cfg, mirror)[0]), False
        except (OSError, ValueError):
            pass
    limit, stated = cfg.get("limit"), cfg.get("questions")
    if stated is None:
        return limit, limit is not None
    return (int(stated) if limit is None else min(int(limit), int(stated))), True


# Assumed decode rate (generated tok/s) of a CPU engine with no probe result: the embedded
# Qwen2.5-Coder-0.5B's raw full-batch rate with 16 slots on 2 cores was 57-75 tok/s
# (config/backend/llamacpp.yaml; README), and a shared machine gets less.
DEFAULT_CPU_TOK_S = 50.0


def probe_rate(probe_dir: Path | None, model: str, backend: str) -> float | None:
    """The measured decode tok/s in `probe_dir`/<model>/<backend>.json, or None (no usable file)."""
    if probe_dir is None:
        return None
    try:
        rate = json.loads((Path(probe_dir) / model / f"{backend}.json").read_text()).get("tok_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(rate) if rate else None
