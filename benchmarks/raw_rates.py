"""Benchmark: issue 14's "raw full-batch rate" beside the probe stage's decode rate, one engine.

    .venv/bin/python benchmarks/raw_rates.py [--model qwen2.5-coder-0.5b-q4km] [--reps 3]

Issue 14 measured the raw engine as "16 requests x 128 tokens" from fresh prompts, so its
timed batch also prefills those prompts; the `probe` stage (retrace.stages.probe) times a
decode batch whose prompts are already in the KV cache, and a prefill batch apart. The two
"raw" rates differ by the prefill share, so an efficiency, or a wall time extrapolated to
"a machine at 100 tok/s", means something only with the rate it was taken against.

One llama.cpp engine (config/backend/llamacpp.yaml's settings); `--reps` repetitions, each:
the issue's batch (as many distinct counting prompts as slots, never sent before, `--tokens`
tokens each with `ignore_eos` so every slot runs its whole budget), then `probe.measure`.
Prints min and median of each and, last,

    issue raw / probe decode: X     (ratio of the medians)

Speed on these machines varies ~3x by the hour; only the ratio, measured in one run, means
anything. Run by `make bench`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from retrace.backends.llamacpp import LlamaCppBackend
from retrace.config.compose import compose
from retrace.stages import probe
from retrace.store.models import materialise


def issue_rate(engine, width: int, tokens: int, rep: int) -> tuple[float, int]:
    """(generated tok/s, prompt tokens) of one cold full batch, prefill inside the timing:
    probe-style requests whose counts start where no earlier batch's (nor the probe's) did."""
    done, seconds = probe.timed(engine, probe.requests(width, tokens, first=1000 * (rep + 1)))
    return sum(c.generated_tokens for c in done) / seconds, sum(c.prompt_tokens for c in done)


def line(name: str, values: list[float]) -> float:
    print(f"{name}: median {statistics.median(values):.1f} tok/s, min {min(values):.1f} ({len(values)} runs)")
    return statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-q4km")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    cfg = compose({"model": a.model, "dataset": "smoke_math", "method": "greedy"})
    rates: dict[str, list[float]] = {"issue": [], "decode": []}
    with tempfile.TemporaryDirectory() as tmp:
        manifest, _ = materialise(cfg["model"], Path(tmp) / "model")
        engine = LlamaCppBackend(manifest, cfg["backend"]["engine"])
        width = probe.parallel_width(engine)
        engine.generate(probe.requests(width, 4))  # warm-up, not timed
        for rep in range(a.reps):
            rate, prompt = issue_rate(engine, width, a.tokens, rep)
            rates["issue"].append(rate)
            p = probe.measure(engine)
            rates["decode"].append(p["tok_s"])  # its prefill rate is not kept: repeated prompts hit the cache
        engine.close()
    print(
        f"model {a.model}: {width} slots; the issue's batch: {width} x {a.tokens} tokens, "
        f"{prompt} prompt tokens"
    )
    issue = line("issue raw (cold prompts, prefill timed)", rates["issue"])
    decode = line("probe decode (prompts cached)", rates["decode"])
    print(f"issue raw / probe decode: {issue / decode:.3f}")


if __name__ == "__main__":
    main()
