"""Which rate prices a role's tokens: a pilot's measurement at a long enough context, else the
probe's (short contexts only), else the backend's stated one ("assumed", and said so).

    r = role_rate(cfg, Path("results/probe"), "refine-model", "vllm", "correct", context=31_000)
    r.decode, r.prefill, r.source      # tok/s per GPU; "pilot (correct @ 32,768)" | "probe" | "assumed"
    reward_rate(cfg["method"]["scorer"], pilot_dir, model, backend)   # a reward model's tok/s

`retrace pilot` (retrace.app) writes results/pilot/<model>/<backend>.json beside the probe's
results/probe/...:

    {"model", "backend", "engine": {engine settings as run}, "device", "measured_at",
     "rates": [{"role", "context_tokens", "decode_tok_s", "prefill_tok_s", "requests"}, ...]}

A role whose requests carry up to C prompt tokens uses a measured rate of that role at a
context >= C (the nearest above C), never one measured at a shorter context: decode slows as
the KV cache a token attends over grows, so a short-context rate would shrink the runtime a
job asks for. The probe (64-token decodes over ~100-token prompts, retrace.stages.probe) prices
only roles whose requests stay within PROBE_CONTEXT tokens. A pilot file of another model,
backend or engine setting (ENGINE_KEYS) than the job's is ignored, with one line saying so.

Reward scoring is a forward pass over each rollout (no decode): a pilot's `reward` rate (its
prefill tok/s) or, assumed, REWARD_TOK_S scaled by 8B over the reward model's parameters (a
72B model reads ~9x fewer tokens a second than the 8B one the constant was stated for). It is
never divided by the reward model's GPUs: transformers' device_map places the layers on them
in sequence, so one GPU works at a time.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PREFILL_X = 8.0  # assumed prefill rate over the stated decode rate (vLLM on one GPU: 5-20x)
REWARD_TOK_S = 2000.0  # assumed: an 8B reward model in transformers, batch 4, bf16
REWARD_STATED_PARAMS = 8.0e9  # the size REWARD_TOK_S was stated for
PROBE_CONTEXT = 512  # prompt tokens up to which the probe's short-context rates may price a role
ENGINE_KEYS = ("tensor_parallel_size", "dtype", "quantization", "kv_cache_dtype")


@dataclass(frozen=True)
class Rate:
    decode: float  # generated tok/s of one engine per GPU
    prefill: float
    source: str  # "pilot (<role> @ <context>)" | "measured by probe" | "assumed"

    @property
    def measured(self) -> bool:
        return self.source != "assumed"


def pilot_dir(probe_dir: Path | None) -> Path | None:
    """results/pilot beside results/probe (the workflow names the probe folder only)."""
    return None if probe_dir is None else Path(probe_dir).parent / "pilot"


def missing_pilot_line(
    experiment: str, pairs: list[tuple[str, str]], folder: Path = Path("results/pilot")
) -> str | None:
    """The GPU (model, backend) pairs with no pilot result, in one line (None: every one has)."""
    missing = [f"{m}/{b}" for m, b in pairs if not (folder / m / f"{b}.json").is_file()]
    if not missing:
        return None
    return (
        f"no pilot has run for {len(missing)} of {len(pairs)} GPU models ({', '.join(missing)}; "
        f"{folder}/<model>/<backend>.json): their runtimes are priced at assumed rates; run "
        f"`retrace pilot --experiment {experiment}` on a GPU allocation first"
    )


def pilot(folder: Path | None, model: str, backend: str, engine: dict) -> list[dict]:
    """The rates of the pilot result for (model, backend), [] if none or not this job's."""
    if folder is None:
        return []
    path = Path(folder) / model / f"{backend}.json"
    found = _read(path)
    if found is None:
        return []
    mine = {"model": model, "backend": backend, **_engine_keys({"tensor_parallel_size": 1, **engine})}
    theirs = {
        "model": found.get("model"),
        "backend": found.get("backend"),
        **_engine_keys(found.get("engine")),
    }
    # an engine setting stated on one side only is not a difference (a default either way)
    wrong = [k for k in mine if theirs.get(k) != mine[k] and (k in ("model", "backend") or k in theirs)]
    if wrong:
        _say(
            f"pilot result {path}: {wrong[0]} {theirs[wrong[0]]!r}, the job's is {mine[wrong[0]]!r}; ignored"
        )
        return []
    return [r for r in found.get("rates") or [] if isinstance(r, dict)]


def _engine_keys(engine: object) -> dict:
    found = engine if isinstance(engine, dict) else {}
    out = {k: found[k] for k in ENGINE_KEYS if found.get(k) is not None}
    if "tensor_parallel_size" in out:
        out["tensor_parallel_size"] = int(out["tensor_parallel_size"])
    return out


@functools.cache
def _say(line: str) -> None:
    """One line per distinct problem, however many jobs read the file."""
    print(f"warning: {line}", file=sys.stderr)


def _read(path: Path) -> dict | None:
    try:
        found = json.loads(path.read_text())
    except OSError:
        return None
    except ValueError as e:
        _say(f"pilot result {path}: not JSON ({e}); ignored")
        return None
    return found if isinstance(found, dict) else None


def measured(rates: list[dict], role: str, context: int, field: str = "decode_tok_s") -> dict | None:
    """The measured rate of `role` at the nearest context >= `context` (None: none that long)."""
    fits = [
        r
        for r in rates
        if r.get("role") == role and r.get(field) and int(r.get("context_tokens") or 0) >= context
    ]
    return min(fits, key=lambda r: int(r["context_tokens"]), default=None)


def role_rate(
    cfg: dict, probe_dir: Path | None, model: str, backend: str, role: str, context: int
) -> Rate | None:
    """The rate that prices `role`'s requests of up to `context` prompt tokens (None: no rate
    measured or stated)."""
    engine = cfg["backend"].get("engine") or {}
    found = measured(pilot(pilot_dir(probe_dir), model, backend, engine), role, context)
    stated = engine.get("throughput_tok_s")
    if found:
        decode = float(found["decode_tok_s"])
        prefill = float(found.get("prefill_tok_s") or decode * PREFILL_X)
        return Rate(decode, prefill, f"pilot ({role} @ {int(found['context_tokens']):,})")
    probe = _probe(probe_dir, model, backend)
    if probe.get("tok_s") and context <= PROBE_CONTEXT:
        decode = float(probe["tok_s"])
        return Rate(decode, float(probe.get("prefill_tok_s") or decode * PREFILL_X), "measured by probe")
    return Rate(float(stated), float(stated) * PREFILL_X, "assumed") if stated else None


def reward_rate(
    scorer: dict, probe_dir: Path | None, model: str, backend: str, engine: dict, context: int
) -> Rate:
    """Tokens a second the job's reward model reads in rollouts of up to `context` tokens (a
    pilot's `reward` rate at least that long, else assumed by the reward model's size)."""
    found = measured(pilot(pilot_dir(probe_dir), model, backend, engine), "reward", context, "prefill_tok_s")
    if found:
        rate = float(found["prefill_tok_s"])
        return Rate(rate, rate, f"pilot (reward @ {int(found.get('context_tokens') or 0):,})")
    params = float(scorer.get("params") or REWARD_STATED_PARAMS)
    rate = REWARD_TOK_S * min(1.0, REWARD_STATED_PARAMS / params)
    return Rate(rate, rate, "assumed")


def _probe(probe_dir: Path | None, model: str, backend: str) -> dict:
    if probe_dir is None:
        return {}
    try:
        found = json.loads((Path(probe_dir) / model / f"{backend}.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
