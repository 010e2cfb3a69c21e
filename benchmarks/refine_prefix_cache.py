"""Benchmark: refinement's computed prompt tokens with prefix caching vs a naive run, and
proof that Maj@N, RM@N, refinement depth 0 and Maj@N' generate no rollout twice.

    .venv/bin/python benchmarks/refine_prefix_cache.py [--model smollm2-135m-q41] [--limit 3]

(1) Refinement (N, D from the flags) runs twice on fresh request caches: with llama.cpp's
prompt cache on (append-only histories let each call reuse its prefix's KV) and off (naive:
every prompt token computed). Prints computed prompt tokens (prompt - cached) of both and
the ratio (target <= 1/3). (2) On one request cache, runs Maj@N, RM@N (llm_judge), refinement
and Maj@N' (N' priced from the measured tokens) and prints how many sample-set rollouts each
sent to the engine: only Maj@N and the N'-N extension should generate any.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from retrace.backends.llamacpp import LlamaCppBackend
from retrace.config.compose import compose
from retrace.config.settings import MethodSettings, method_settings
from retrace.engine.llm import CachedLLM
from retrace.methods.base import MethodContext
from retrace.scoring.compute import equal_compute_n
from retrace.store.cache import RequestCache
from retrace.store.data import prepare
from retrace.store.models import materialise
from retrace.util.registry import METHODS, TASKS


def method_cfg(name: str, a) -> MethodSettings:
    over = [f"method.sampling.max_tokens={a.max_tokens}", f"method.n={a.n}"]
    if name == "refine":
        over.append(f"method.depth={a.depth}")
    return method_settings(compose({"method": name}, over)["method"], f"config/method/{name}.yaml")


def run(name, cfg, problems, engine, manifest, cache, ctx):
    llm = CachedLLM(lambda: engine, "llamacpp", manifest, cache)
    METHODS.get(name)(problems, cfg, llm, ctx)
    return llm.usage


def prefix_ratio(a, problems, manifest, ctx, tmp: Path) -> None:
    computed = {}
    for on in (True, False):
        engine = LlamaCppBackend(
            manifest, {"n_parallel": 4, "n_ctx": 4096, "n_threads": 2, "n_batch": 512, "cache_prompt": on}
        )
        u = run(
            "refine",
            method_cfg("refine", a),
            problems,
            engine,
            manifest,
            RequestCache(tmp / f"prefix-{on}.sqlite"),
            ctx,
        )
        engine.close()
        computed[on] = u.prompt_tokens_all - u.cached_prompt_tokens_all
        print(
            f"prefix cache {'on ' if on else 'off'}: {u.prompt_tokens_all} prompt tokens, "
            f"{computed[on]} computed"
        )
    print(
        f"ratio computed prompt tokens, cached/naive: {computed[True] / computed[False]:.3f} (target <= 0.333)"
    )


def no_rollout_twice(a, problems, manifest, ctx, tmp: Path) -> None:
    engine = LlamaCppBackend(
        manifest, {"n_parallel": 4, "n_ctx": 4096, "n_threads": 2, "n_batch": 512, "cache_prompt": True}
    )
    cache = RequestCache(tmp / "shared.sqlite")
    usage = {}
    for name in ("majority", "best_of_n", "refine"):
        usage[name] = run(name, method_cfg(name, a), problems, engine, manifest, cache, ctx)
    eq = equal_compute_n(vars(usage["refine"]), vars(usage["majority"]), a.n, manifest["params"])
    cfg = {**method_cfg("majority", a), "n": eq["n_prime"]}
    usage["majority_eq"] = run("majority", cfg, problems, engine, manifest, cache, ctx)
    engine.close()
    rollouts = len(problems) * a.n
    print(f"sample set: {rollouts} rollouts (N={a.n}); N'={eq['n_prime']}")
    for name, u in usage.items():
        print(
            f"{name:12s} requests {u.requests:4d}, from cache {u.cache_hits:4d}, "
            f"engine {u.requests - u.cache_hits:4d}"
        )
    print(
        f"rollouts generated twice: best_of_n {rollouts - min(rollouts, usage['best_of_n'].cache_hits)}, "
        f"Maj@N' {generated_twice(usage['majority_eq'], a.n, eq['n_prime'], len(problems))}"
        f" (engine ran {usage['majority_eq'].requests - usage['majority_eq'].cache_hits};"
        f" only the extension (N'-N) x problems = {(eq['n_prime'] - a.n) * len(problems)} is new)"
    )


def generated_twice(u, n: int, n_prime: int, n_problems: int) -> int:
    """Maj@N' requests the engine ran beyond its new (N'-N) x problems samples: rollouts of the
    stored sample set generated again (0 when the request cache serves all of them). The old
    line printed problems x N' - requests, which is 0 by construction."""
    return (u.requests - u.cache_hits) - (n_prime - n) * n_problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-q41")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args()
    cfg = compose({"model": a.model, "dataset": "smoke_math"}, [f"dataset.limit={a.limit}"])
    task = TASKS.get("smoke_math")
    ctx = MethodContext(seed=0, task=task, template=task.default_template)
    with tempfile.TemporaryDirectory() as tmp:
        manifest, _ = materialise(cfg["model"], Path(tmp) / "model")
        problems, _ = prepare(cfg["dataset"], None)
        prefix_ratio(a, problems, manifest, ctx, Path(tmp))
        no_rollout_twice(a, problems, manifest, ctx, Path(tmp))


if __name__ == "__main__":
    main()
