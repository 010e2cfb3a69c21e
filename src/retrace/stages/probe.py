"""Stage `probe`: the raw engine's full-batch generation rate on this machine, measured once
per model and backend, so the report can say how busy the pipeline kept the engine.

    python -m retrace probe --model M --backend B --dataset D --method X --label L --seed 0 \
        --manifest results/models/M/manifest.json --out results/probe/M/B.json

How: the engine is loaded with the job's engine settings; one short request warms it up (not
timed); then as many requests as the engine runs at once (llama.cpp: its slots; a batching
engine: its batch size) go in together, each asking for `tokens` tokens (prompts/probe.j2
invites a long answer; only tokens actually generated count). rate = generated tokens /
wall seconds of that batch. No request cache: this measures the engine, not retrace.

What it is not: a benchmark (see benchmarks/pipeline_vs_engine.py for interleaved repeats);
one batch on a shared machine can be off by the machine's own noise, which the report states
beside the ratio. The measured rate is kept out of every rerun key: re-probing never makes
anything downstream stale except the report.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from retrace.atomic import write_json
from retrace.plan import Job, stage_sources
from retrace.provenance import Provenance
from retrace.records import Message, Request, Sampling
from retrace.registry import BACKENDS
from retrace.templates import render

PROBE_TOKENS = 64


def requests(n: int, tokens: int) -> list[Request]:
    """`n` distinct requests (different seeds and sample indices) of `tokens` tokens."""
    prompt = render("probe.j2")
    return [Request(messages=(Message("user", prompt),), sample_index=i, tag=f"probe/{i}",
                    sampling=Sampling(temperature=0.8, max_tokens=tokens, seed=1000 + i))
            for i in range(n)]


def parallel_width(backend) -> int:
    """How many requests the engine runs at once."""
    return int(getattr(backend, "slots", 0) or backend.batch_size())


def measure(backend, tokens: int = PROBE_TOKENS) -> dict:
    """Warm up, then time one full batch; the figures the report needs."""
    backend.generate(requests(1, 8))
    batch = requests(parallel_width(backend), tokens)
    start = time.perf_counter()
    done = backend.generate(batch)
    seconds = time.perf_counter() - start
    generated = sum(c.generated_tokens for c in done)
    return {"requests": len(batch), "max_tokens": tokens, "generated_tokens": generated,
            "seconds": round(seconds, 3), "tok_s": round(generated / seconds, 3) if seconds else None}


def run(job: Job, manifest_path: Path, out: Path, tokens: int = PROBE_TOKENS) -> dict:
    cfg = job.config()
    manifest = json.loads(Path(manifest_path).read_text())
    prov = Provenance("probe", {"backend": cfg["backend"], "tokens": tokens}, stage_sources("probe"),
                      inputs=[str(manifest_path), str(Path(__file__).parents[1] / "prompts" / "probe.j2")])
    backend = BACKENDS.get(cfg["backend"]["name"])(manifest, cfg["backend"].get("engine", {}))
    try:
        result = {"model": manifest["name"], "backend": cfg["backend"]["name"], **measure(backend, tokens)}
        prov.extra.update({"device": str(backend.device), "engine": cfg["backend"],
                           "model": {"name": manifest["name"], "fingerprint": manifest["fingerprint"]}})
    finally:
        backend.close()
    write_json(out, result)
    prov.write(out)
    return result
