"""Benchmark: the tests' SmolLM2 as Q4_0 (requantized) against the Q4_1 its package ships.

    .venv/bin/python benchmarks/quant_speed.py [--reps 3]

Both models are materialised as a run would (config/model/smollm2-135m-q41.yaml and
smollm2-135m-q40.yaml), each loaded in one llama.cpp engine with config/backend/llamacpp.yaml's
settings, and timed on the same two workloads, alternating the models within each repetition:
- prefill: 4 fresh prompts of ~970 tokens at once, 1 token each (prompts never sent before);
- decode: 4 fresh ~100-token prompts, 32 greedy tokens each.
Prints each model's median seconds and, last, the two time ratios

    Q4_0 / Q4_1 time, prefill: X      decode: Y

(below 1: Q4_0 is faster). Speed on these machines varies ~3x by the hour; only the ratios,
measured in one run, mean anything. Run by `make bench`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from retrace.backends.llamacpp import LlamaCppBackend
from retrace.config.compose import compose
from retrace.store.models import materialise
from retrace.util.records import Message, Request, Sampling

MODELS = ("smollm2-135m-q41", "smollm2-135m-q40")
WORDS = " ".join(f"w{i}" for i in range(3000))


def batch(first: int, chars: int, tokens: int, width: int = 4) -> list[Request]:
    """`width` prompts that differ from their first characters on (no KV reuse across them)."""
    return [
        Request(
            messages=(Message("user", f"{first + i} {WORDS[:chars]}"),),
            sampling=Sampling(temperature=0.0, max_tokens=tokens, seed=first + i, ignore_eos=True),
        )
        for i in range(width)
    ]


def timed(engine, requests: list[Request]) -> float:
    start = time.perf_counter()
    engine.generate(requests)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    cfg = compose({"model": MODELS[0], "dataset": "smoke_math", "method": "greedy"})
    seconds = {(m, w): [] for m in MODELS for w in ("prefill", "decode")}
    with tempfile.TemporaryDirectory() as tmp:
        engines = {}
        for name in MODELS:
            manifest, _ = materialise(compose({"model": name})["model"], Path(tmp) / name)
            engines[name] = LlamaCppBackend(manifest, cfg["backend"]["engine"])
            engines[name].generate(batch(0, 200, 1, width=1))  # warm-up, not timed
        for rep in range(a.reps):
            for name, engine in engines.items():
                first = 1000 * (rep + 1)
                seconds[name, "prefill"].append(timed(engine, batch(first, 1200, 1)))
                seconds[name, "decode"].append(timed(engine, batch(first + 100, 100, 32)))
        for engine in engines.values():
            engine.close()
    med = {k: statistics.median(v) for k, v in seconds.items()}
    for (name, work), value in med.items():
        print(f"{name} {work}: median {value:.2f} s (min {min(seconds[name, work]):.2f}, {a.reps} runs)")
    ratio = {w: med[MODELS[1], w] / med[MODELS[0], w] for w in ("prefill", "decode")}
    print(f"Q4_0 / Q4_1 time, prefill: {ratio['prefill']:.3f}      decode: {ratio['decode']:.3f}")


if __name__ == "__main__":
    main()
