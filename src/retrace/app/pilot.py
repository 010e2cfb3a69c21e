"""`retrace pilot --experiment E`: the first step on a GPU allocation. It measures each
model's engine at the experiment's own prompt and context lengths, role by role, and prints
the grid re-sized at those rates beside the one at the assumed rates.

    retrace pilot --experiment paper                   # every model of the experiment
    retrace pilot --experiment paper --model qwen2.5-math-7b --requests 16
    retrace pilot --experiment vllm_plumbing --decode-tokens 8    # a CPU check (CI)

For each model × backend of the experiment (one engine, loaded as the generation jobs load
it: the manifest results/models/<model>/manifest.json, the jobs' engine settings at their
longest context; retrace.app.pilot_roles says which roles and lengths) and each role its jobs
call (sample, continue, critique, correct, judge, reward):
- prefill: `requests` distinct prompts of the role's context length, one token each;
  prefill_tok_s = prompt tokens the engine's KV cache did not serve / wall seconds;
- decode: the same prompts (now in the prefix cache) generating the role's whole cap
  (`ignore_eos`, so every request runs to it: Maj@N' samples at full length, refinement's
  correction at its deepest round's context); decode_tok_s = generated tokens / (wall seconds
  less the uncached prompt tokens at the prefill rate);
- reward: the experiment's reward model itself (retrace.engine.scorers) scores `requests`
  solutions of the role's length; prefill_tok_s = tokens it read / wall seconds.
The prompts are number lists (prompts/probe_prefill.j2) whose length is set from two
calibration requests (tokens per number, measured by the engine), so a role's context is
the one the jobs reach, in the engine's own tokens. Each model's result is written as soon
as it is measured, to results/pilot/<model>/<backend>.json with a provenance record beside it:

    {"model", "backend", "engine": {settings as run}, "device", "measured_at",
     "rates": [{"role", "context_tokens", "max_tokens", "decode_tok_s", "prefill_tok_s", "requests"}],
     "tok_s", "prefill_tok_s"}     # the slowest generating role's rates (what the probe's readers take)

so a model that fails (does not fit the GPU, a server started too short) ends the pilot with
one line and the models measured before keep their results.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from retrace.app.pilot_roles import Engine, RoleLoad, experiment_loads, fit
from retrace.util.records import Message, Request, Sampling
from retrace.util.templates import render

DEFAULT_REQUESTS = 32  # 4 questions x refinement's 8 rollouts: a batch as the jobs keep one
CALIBRATION = (8, 40)  # numbers in the two calibration prompts (up to ~8 tokens each)
FIRST_NUMBER = 1_000_000  # every prompt's numbers have 7 digits: one tokens-per-number rate


@dataclass(frozen=True)
class Calibration:
    """Prompt tokens of a number-list prompt of `count` numbers: overhead + per_number x count."""

    overhead: float
    per_number: float

    def numbers(self, context: int) -> int:
        return max(1, math.ceil((context - self.overhead) / self.per_number))


def numbers_request(start: int, count: int, max_tokens: int, seed: int, ignore_eos: bool = False) -> Request:
    """A user turn listing `count` numbers from `start` (distinct `start`s part at once, so no
    request's prompt is served from another's KV cache)."""
    return Request(
        messages=(Message("user", render("probe_prefill.j2", start=start, count=count)),),
        sampling=Sampling(temperature=0.8, max_tokens=max_tokens, seed=seed, ignore_eos=ignore_eos),
        tag=f"pilot/{start}",
    )


def calibrate(backend) -> Calibration:
    """Tokens per listed number and the chat template's overhead, from two one-token requests."""
    low, high = CALIBRATION
    done = backend.generate([numbers_request(9_000_000, low, 1, 1), numbers_request(9_500_000, high, 1, 2)])
    per = max(0.1, (done[1].prompt_tokens - done[0].prompt_tokens) / (high - low))
    return Calibration(done[0].prompt_tokens - per * low, per)


def timed(backend, batch: list[Request]) -> tuple[list, float]:
    start = time.perf_counter()
    done = backend.generate(batch)
    return done, time.perf_counter() - start


def measure_generation(backend, load: RoleLoad, n: int, first: int, calib: Calibration) -> dict:
    """One role's prefill and decode rates at its context (module docstring)."""
    count = calib.numbers(load.context)
    starts = [first + 1_000 * i for i in range(n)]
    filled, prefill_s = timed(backend, [numbers_request(s, count, 1, i) for i, s in enumerate(starts)])
    prefilled = sum(c.prompt_tokens - c.cached_prompt_tokens for c in filled)
    prefill_rate = prefilled / prefill_s if prefill_s > 0 else None
    batch = [
        numbers_request(s, count, load.max_tokens, 100 + i, ignore_eos=True) for i, s in enumerate(starts)
    ]
    done, seconds = timed(backend, batch)
    uncached = sum(c.prompt_tokens - c.cached_prompt_tokens for c in done)
    decode_s = max(seconds - (uncached / prefill_rate if prefill_rate else 0.0), 0.1 * seconds)
    generated = sum(c.generated_tokens for c in done)
    return {
        "role": load.role,
        "context_tokens": round(sum(c.prompt_tokens for c in done) / n),
        "max_tokens": load.max_tokens,
        "decode_tok_s": round(generated / decode_s, 3) if decode_s > 0 else None,
        "prefill_tok_s": round(prefill_rate, 3) if prefill_rate else None,
        "requests": n,
        "generated_tokens": generated,
        "full_share": round(sum(c.generated_tokens >= load.max_tokens for c in done) / n, 3),
        "seconds": round(prefill_s + seconds, 3),
    }


def measure_reward(load: RoleLoad, n: int, calib: Calibration | None) -> dict:
    """The reward model's reading rate: `n` solutions of the role's length scored in its batches."""
    from retrace.engine.scorers import ScoreItem, build_scorer
    from retrace.util.records import Problem

    scorer = build_scorer({"scorer": load.scorer}, None)
    per = calib.per_number if calib else 5.0
    text = render("probe_prefill.j2", start=FIRST_NUMBER, count=max(1, int(load.context / per)))
    items = [ScoreItem(Problem(f"pilot-{i}", f"Question {i}.", ""), text) for i in range(n)]
    scorer.score(items[:1])  # loads the model: not timed
    start = time.perf_counter()
    scorer.score(items)
    seconds = time.perf_counter() - start
    read = n * _tokens(scorer, f"Question 0.\n{text}")
    return {
        "role": "reward",
        "context_tokens": read // n,
        "max_tokens": 0,
        "decode_tok_s": None,
        "prefill_tok_s": round(read / seconds, 3) if seconds > 0 else None,
        "requests": n,
        "model": (load.scorer or {}).get("path") or (load.scorer or {}).get("repo"),  # what was loaded
        "revision": None if (load.scorer or {}).get("path") else (load.scorer or {}).get("revision"),
        "seconds": round(seconds, 3),
    }


def _tokens(scorer, text: str) -> int:
    """Tokens of `text` by the scorer's own tokenizer where it has one, else preflight's count."""
    tokenizer = getattr(scorer, "tokenizer", None)
    if tokenizer is not None:
        return len(tokenizer(text)["input_ids"])
    from retrace.planning.preflight import tokens

    return tokens(text)


def context_limit(backend_cfg: dict, manifest: dict) -> int | None:
    """The engine's context in tokens (llama.cpp: per slot), None where it states none."""
    engine = backend_cfg.get("engine") or {}
    for key in ("max_model_len", "n_ctx"):
        if engine.get(key):
            return int(engine[key])
    return manifest.get("context")


def measure_engine(backend, engine: Engine, n: int, decode_cap: int | None, limit: int | None) -> list[dict]:
    """Every role of `engine` on the loaded `backend`, generating roles first."""
    calib = calibrate(backend)
    width = int(getattr(backend, "slots", 0) or backend.batch_size())
    rates = []
    for i, load in enumerate(engine.roles.values()):
        if load.role == "reward":
            continue
        capped = RoleLoad(load.role, load.context, min(load.max_tokens, decode_cap or load.max_tokens))
        rates.append(
            measure_generation(backend, fit(capped, limit), min(n, width), FIRST_NUMBER * (1 + i), calib)
        )
    for load in engine.roles.values():
        if load.role == "reward":
            rates.append(measure_reward(load, n, calib))
    return rates


def device_name(backend) -> str:
    """The GPU's name where the engine runs on one, else its device (cpu, a served URL)."""
    device = str(getattr(backend, "device", "cpu"))
    if device.startswith("cuda"):
        try:
            import torch

            return torch.cuda.get_device_name(0)
        except (ImportError, RuntimeError, AssertionError):
            return device
    return device


def load_manifest(results: Path, model: str) -> tuple[Path, dict]:
    from retrace.store import models

    path = results / "models" / model / "manifest.json"
    if not path.exists():
        raise ValueError(
            f"pilot: no manifest at {path}: materialise the model first, once, on a node with network "
            f"(`snakemake --cores 1 {path}`)"
        )
    return path, models.load_manifest(path)


def result_of(engine: Engine, backend, manifest: dict, rates: list[dict]) -> dict:
    """The pilot result of one engine (module docstring), the slowest generating role's rates on top."""
    generating = [r for r in rates if r["role"] != "reward"]
    slowest = min((r["decode_tok_s"] for r in generating if r["decode_tok_s"]), default=None)
    prefill = min((r["prefill_tok_s"] for r in generating if r["prefill_tok_s"]), default=None)
    return {
        "model": manifest["name"],
        "backend": engine.backend,
        "engine": engine.backend_cfg.get("engine") or {},
        "device": device_name(backend),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rates": rates,
        "tok_s": slowest,
        "prefill_tok_s": prefill,
    }


def pilot_engine(engine: Engine, results: Path, out_dir: Path, n: int, decode_cap: int | None) -> Path:
    """Load one engine, measure its roles, write its result and provenance; the path written.
    An engine that cannot start or run (too big for the GPU, a server started too short) is one
    line naming the model; the results written before stay."""
    from retrace.planning import closure
    from retrace.store.provenance import Provenance
    from retrace.util.atomic import write_json
    from retrace.util.registry import BACKENDS

    manifest_path, manifest = load_manifest(results, engine.model)
    out = out_dir / engine.model / f"{engine.backend}.json"
    prov = Provenance(
        "pilot",
        {"backend": engine.backend_cfg, "requests": n, "decode_tokens": decode_cap},
        closure.code_files(("retrace.app.pilot", f"retrace.backends.{engine.backend_cfg['name']}")),
        inputs=[str(manifest_path)],
    )
    try:
        backend = BACKENDS.get(engine.backend_cfg["name"])(manifest, engine.backend_cfg.get("engine") or {})
    except Exception as e:  # any engine's start failure (CUDA out of memory, a bad setting): one line
        raise ValueError(f"pilot: {engine.model} on {engine.backend} did not start: {_line(e)}") from e
    try:
        rates = measure_engine(backend, engine, n, decode_cap, context_limit(engine.backend_cfg, manifest))
        result = result_of(engine, backend, manifest, rates)
    except Exception as e:  # a request the engine refused (context, memory): one line
        raise ValueError(
            f"pilot: {engine.model} on {engine.backend} failed while measuring: {_line(e)}"
        ) from e
    finally:
        backend.close()
    prov.extra.update({"model": {"name": manifest["name"], "fingerprint": manifest["fingerprint"]}})
    write_json(out, result)
    prov.write(out)
    return out


def _line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split()) or 'no message'}"[:400]


def rate_lines(result: dict) -> list[str]:
    """One line per measured role: its context, decode and prefill rates."""
    out = []
    for r in result["rates"]:
        decode = f"decode {r['decode_tok_s']:,.1f} tok/s, " if r.get("decode_tok_s") else ""
        prefill = f"prefill {r['prefill_tok_s']:,.1f} tok/s" if r.get("prefill_tok_s") else "prefill -"
        out.append(
            f"pilot: {result['model']} on {result['backend']} ({result['device']}) {r['role']}: "
            f"{r['context_tokens']:,} prompt tokens, {r['max_tokens']:,} generated x {r['requests']}: {decode}{prefill}"
        )
    return out


def grid_lines(global_cfg: dict, out_dir: Path, limit) -> list[str]:
    """The experiment's estimate at the assumed rates and at the pilot's (retrace.planning.parts)."""
    from retrace.planning.estimate import estimate_of
    from retrace.planning.parts import engine_loads, sized
    from retrace.planning.plan import jobs, shared_overrides

    planned = jobs(global_cfg)
    dso = shared_overrides(global_cfg, "dataset")
    lines = []
    # out_dir (results/pilot) as the probe folder: a GPU job's roles read the pilot's rates from
    # the "pilot" folder beside it (retrace.planning.rates.pilot_dir: this one), a CPU job the
    # top-level tok_s as a probe's
    for name, folder in (("assumed", None), ("pilot", out_dir)):
        s = sized(planned, global_cfg.get("mirror"), dso, folder, limit)
        lines.append(f"{name}: {estimate_of(planned, s).line()}")
        lines.append(f"{name}: {engine_loads(s).line()}")
    return lines


def run(
    global_cfg: dict,
    results: Path = Path("results"),
    models: tuple[str, ...] = (),
    requests: int = DEFAULT_REQUESTS,
    decode_cap: int | None = None,
    limit=None,
) -> list[Path]:
    """Pilot every engine of the experiment (module docstring); print each rate and both grids."""
    engines = experiment_loads(global_cfg, models)
    if not engines:
        raise ValueError(
            f"pilot: experiment {global_cfg['experiment']!r} has no generation job on {list(models)}"
        )
    out_dir, written = results / "pilot", []
    for engine in engines.values():
        path = pilot_engine(engine, results, out_dir, requests, decode_cap)
        written.append(path)
        print("\n".join(rate_lines(json.loads(path.read_text()))), flush=True)
    print("\n".join(grid_lines(global_cfg, out_dir, limit)))
    return written
