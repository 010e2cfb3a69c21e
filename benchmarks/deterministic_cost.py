"""Benchmark: what the deterministic engine mode costs, as deterministic / default tok/s.

    PYTHONPATH=src .venv/bin/python benchmarks/deterministic_cost.py [--reps 3] [--per-rep 2] [--n 4]

Two llama.cpp engines on the embedded SmolLM2 model live in one process: the default mode
(config/backend/llamacpp.yaml: parallel slots, KV prefix reuse) and `deterministic: true` (one
slot, no KV reuse; see retrace.backends.llamacpp). One warm-up batch per engine is excluded;
then `--reps` repetitions run the same Maj@N request batch through both, alternating which
goes first, each repetition on problems not used before (so neither engine's prefix cache has
seen them). Prints each mode's generated tokens per second (median and min over repetitions)
and the ratio deterministic / default of the medians and of the mins. Run by `make bench`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from retrace.backends.llamacpp import LlamaCppBackend
from retrace.config.compose import compose
from retrace.config.settings import method_settings
from retrace.methods.base import MethodContext, sample_requests
from retrace.store.data import prepare
from retrace.store.models import materialise
from retrace.util.registry import TASKS

MODES = ("default", "deterministic")


def batches(cfg: dict, n: int, per_rep: int, reps: int) -> list[list]:
    """Request batches: one warm-up, then one per repetition, on disjoint problems."""
    problems, _ = prepare({**cfg["dataset"], "limit": None}, None)
    need = per_rep * (reps + 1)
    if need > len(problems):
        raise SystemExit(
            f"--per-rep {per_rep} x ({reps} reps + warm-up) needs {need} problems; "
            f"the bundled set has {len(problems)}"
        )
    task = TASKS.get("smoke_math")
    ctx = MethodContext(seed=7, task=task, template=task.default_template)
    sampling = method_settings(cfg["method"], "config/method/majority.yaml").sampling
    chunks = [problems[i * per_rep : (i + 1) * per_rep] for i in range(reps + 1)]
    return [[r for p in chunk for r in sample_requests(p, sampling, ctx, n)] for chunk in chunks]


def tok_per_s(engine: LlamaCppBackend, requests: list) -> float:
    start = time.perf_counter()
    done = engine.generate(requests)
    return sum(c.generated_tokens for c in done) / (time.perf_counter() - start)


def measure(engines: dict, work: list[list]) -> dict[str, list[float]]:
    for mode in MODES:  # warm-up: first-call costs (graph setup, page-in) are excluded
        tok_per_s(engines[mode], work[0])
    speeds: dict[str, list[float]] = {m: [] for m in MODES}
    for i, requests in enumerate(work[1:]):
        for mode in MODES if i % 2 == 0 else MODES[::-1]:  # alternate who goes first
            speeds[mode].append(tok_per_s(engines[mode], requests))
    return speeds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-q41")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per mode (>= 3)")
    ap.add_argument("--per-rep", type=int, default=2, help="problems per repetition")
    ap.add_argument("--n", type=int, default=4, help="samples per problem (Maj@N)")
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args()
    over = [f"method.n={a.n}", f"method.sampling.max_tokens={a.max_tokens}"]
    cfg = compose({"model": a.model, "dataset": "smoke_math", "method": "majority"}, over)
    work = batches(cfg, a.n, a.per_rep, a.reps)
    with tempfile.TemporaryDirectory() as tmp:
        manifest, _ = materialise(cfg["model"], Path(tmp) / "model")
        base = cfg["backend"]["engine"]
        engines = {
            m: LlamaCppBackend(manifest, {**base, "deterministic": m == "deterministic"}) for m in MODES
        }
        try:
            speeds = measure(engines, work)
        finally:
            for e in engines.values():
                e.close()
    print(
        f"requests per repetition: {len(work[1])} ({a.per_rep} problems x {a.n} samples, "
        f"max {a.max_tokens} tokens), {a.reps} repetitions per mode, warm-up excluded"
    )
    for m in MODES:
        print(
            f"{m}_tok_s: median {statistics.median(speeds[m]):.1f}, min {min(speeds[m]):.1f} "
            f"(all: {', '.join(f'{s:.1f}' for s in speeds[m])})"
        )
    med = statistics.median(speeds["deterministic"]) / statistics.median(speeds["default"])
    low = min(speeds["deterministic"]) / min(speeds["default"])
    print(f"deterministic_vs_default_tok_s: {med:.3f} (medians), {low:.3f} (mins)")


if __name__ == "__main__":
    main()
