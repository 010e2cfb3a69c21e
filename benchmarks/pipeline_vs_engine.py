"""Benchmark: the pipeline's generation throughput as a ratio of the raw engine's.

    .venv/bin/python benchmarks/pipeline_vs_engine.py [--model smollm2-135m-q41] [--n 4] [--limit 8]

Runs the same Maj@N requests (bundled maths set) twice in one process on one engine:
(1) raw: `LlamaCppBackend.generate` on the request list; (2) pipeline: the `majority`
method through `CachedLLM` with a cold request cache (prompt rendering, cache lookups,
batch commits, row building). The engine's prompt cache is cleared between the two by
using distinct seeds for the pipeline run, so neither run benefits from the other.
Prints generated tokens per second for both and their ratio (pipeline / raw).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from retrace.backends.llamacpp import LlamaCppBackend
from retrace.cache import RequestCache
from retrace.config import compose
from retrace.data import prepare
from retrace.llm import CachedLLM
from retrace.methods.base import MethodContext, sample_requests
from retrace.models import materialise
from retrace.registry import METHODS, TASKS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-q41")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    a = ap.parse_args()
    over = [f"method.n={a.n}", f"method.sampling.max_tokens={a.max_tokens}", f"dataset.limit={a.limit}"]
    cfg = compose({"model": a.model, "dataset": "smoke_math", "method": "majority"}, over)
    with tempfile.TemporaryDirectory() as tmp:
        manifest, _ = materialise(cfg["model"], Path(tmp) / "model")
        problems, _ = prepare(cfg["dataset"], None)
        task = TASKS.get("smoke_math")
        engine = LlamaCppBackend(manifest, cfg["backend"]["engine"])
        raw_ctx = MethodContext(seed=1000, task=task, template=task.default_template)
        requests = [r for p in problems for r in sample_requests(p, cfg["method"]["sampling"], raw_ctx, a.n)]
        start = time.perf_counter()
        raw = engine.generate(requests)
        raw_s = time.perf_counter() - start
        raw_tok = sum(c.generated_tokens for c in raw)

        llm = CachedLLM(lambda: engine, "llamacpp", manifest, RequestCache(Path(tmp) / "cache.sqlite"))
        ctx = MethodContext(seed=2000, task=task, template=task.default_template)
        start = time.perf_counter()
        METHODS.get("majority")(problems, cfg["method"], llm, ctx)
        pipe_s = time.perf_counter() - start
        pipe_tok = llm.usage.generated_tokens_all
        engine.close()
    print(f"requests: {len(requests)} per run, model {a.model}")
    print(f"raw engine : {raw_tok} tokens in {raw_s:.1f} s = {raw_tok / raw_s:.1f} tok/s")
    print(f"pipeline   : {pipe_tok} tokens in {pipe_s:.1f} s = {pipe_tok / pipe_s:.1f} tok/s")
    print(f"ratio pipeline/raw tok/s: {(pipe_tok / pipe_s) / (raw_tok / raw_s):.3f}")


if __name__ == "__main__":
    main()
