"""Cost estimate of an experiment before anything runs: `retrace plan --estimate`.

Upper bounds from configuration alone: generated tokens ≤ problems × model calls per
problem (each method's `run.calls_per_problem(cfg)`) × max_tokens; prompt tokens ≤ problems ×
calls × the job's worst-case context (retrace.preflight: longest question + everything the
method may generate into one context; for refinement prompts are most of the compute);
FLOPs ≤ 2 × params × (prompt + generated) tokens, nominal (no prefix reuse);
GPU-hours = generated tokens / the backend's stated `throughput_tok_s` (generated tokens per
second per GPU for one engine; a stated assumption, not a measurement), for jobs on GPUs;
CPU wall time = generated tokens / the engine's decode rate on this machine, for jobs on CPUs
(retrace.cluster.gpus == 0): the `probe` stage's measured full-batch `tok_s`
(results/probe/<model>/<backend>.json) when a probe result exists, else DEFAULT_CPU_TOK_S.
The token bound over-counts (chains stop before max_tokens) about as much as the raw decode
rate over-states what a run gets (prefill, part-filled batches, a shared machine): measured
against `make controls` in docs/controls.md. Maj@N' jobs are priced as Maj@N: their N' is
only known after the refinement has run.

The method families' engine stages are estimated apart (`family_lines`: each registered family's
`estimate_lines`, retrace.family): DRR's reasoner jobs (distil, generate) at questions × calls ×
max_tokens (drr/family.py), ART's run and selection jobs at each method's token bound
(art/family.py), each priced with `FamilyEstimate` as above. DRR's
discriminator and SFT-LoRA train for a bounded time, not a number of tokens: their runtime caps
(`drr.runtime`) are listed by `retrace plan --check`, not priced here.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from retrace.devices import gpus
from retrace.family import FAMILIES, Context
from retrace.plan import Job, job_config
from retrace.registry import METHODS


@functools.cache
def problem_count(dataset: str, overrides: tuple, mirror: str | None) -> int | None:
    """Problems a dataset config yields (its limit, or the source file's count; None: unknown)."""
    from retrace.config import compose
    from retrace.data import prepare

    cfg = compose({"dataset": dataset}, overrides)["dataset"]
    if cfg.get("source") == "hub":
        return cfg.get("limit")
    try:
        return len(prepare(cfg, mirror)[0])
    except (OSError, ValueError):
        return cfg.get("limit")


# Assumed decode rate (generated tok/s) of a CPU engine with no probe result: the embedded
# Qwen2.5-Coder-0.5B's raw full-batch rate with 16 slots on 2 cores was 57-75 tok/s
# (config/backend/llamacpp.yaml; README), and a shared machine gets less.
DEFAULT_CPU_TOK_S = 50.0


def probe_rate(probe_dir: Path | None, model: str, backend: str) -> float | None:
    """The measured decode tok/s in `probe_dir`/<model>/<backend>.json, or None (no usable file)."""
    if probe_dir is None:
        return None
    try:
        rate = json.loads((Path(probe_dir) / model / f"{backend}.json").read_text()).get("tok_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(rate) if rate else None


@dataclass
class Estimate:
    jobs: int = 0
    unknown: int = 0  # jobs whose problem count could not be known
    generated_tokens: int = 0
    prompt_tokens: int = 0
    flops: float = 0.0
    gpu_hours: float = 0.0
    gpu_jobs: int = 0
    cpu_hours: float = 0.0  # wall time of the CPU jobs, one after another
    cpu_jobs: int = 0
    cpu_rates: dict = field(default_factory=dict)  # {(model, backend): (tok/s, "probe" | "assumed")}

    def line(self) -> str:
        times = []
        if self.gpu_jobs or not self.cpu_jobs:
            times.append(f"≈ {self.gpu_hours:,.1f} GPU-hours at the backends' stated throughput")
        if self.cpu_jobs:
            rates = ", ".join(
                f"{rate:,.0f} tok/s {'measured by probe' if how == 'probe' else 'assumed, no probe yet'}"
                for rate, how in sorted(set(self.cpu_rates.values()))
            )
            times.append(f"≈ {self.cpu_hours:,.1f} h CPU wall time at {rates}")
        return (
            f"estimate: {self.jobs} generation jobs, ≤ {self.generated_tokens:,} generated tokens, "
            f"≤ {self.prompt_tokens:,} prompt tokens, ≤ {self.flops / 1e12:,.1f} TFLOPs (prompts included), "
            + "; ".join(times)
            + (f"; {self.unknown} jobs of unknown size" if self.unknown else "")
        )


def job_tokens(job: Job, cfg: dict, mirror: str | None, dataset_overrides: tuple = ()) -> int | None:
    """Upper-bound generated tokens of one job (None: its problem count is unknown).
    A data-parallel shard job gets 1/shards of its dataset's problems."""
    n = problem_count(job.dataset, dataset_overrides, mirror)
    if n is None:
        return None
    if job.shards > 1:
        n = -(-n // job.shards)  # shards are balanced by hash; the bound rounds up
    calls = getattr(METHODS.get(cfg["method"]["name"]), "calls_per_problem", lambda c: c.get("n", 1))
    return n * calls(cfg["method"]) * int(cfg["method"]["sampling"]["max_tokens"])


def prompt_tokens(
    job: Job, cfg: dict, generated: int, mirror: str | None, dataset_overrides: tuple = ()
) -> int:
    """Upper bound of a job's prompt tokens: every call's prompt is at most the worst-case context."""
    from retrace.preflight import generated_tokens, question_tokens

    calls_x_problems = generated // max(1, int(cfg["method"]["sampling"]["max_tokens"]))
    worst = question_tokens(job.dataset, mirror, tuple(dataset_overrides)) + generated_tokens(cfg["method"])
    return calls_x_problems * worst


def estimate(
    jobs: list[Job], mirror: str | None, dataset_overrides: tuple = (), probe_dir: Path | None = None
) -> Estimate:
    """The experiment's bounds; CPU jobs priced at the probe's rate found in `probe_dir`
    (the workflow's results/probe) or DEFAULT_CPU_TOK_S."""
    est = Estimate()
    for job in jobs:
        cfg = job_config(job)
        tokens = job_tokens(job, cfg, mirror, dataset_overrides)
        est.jobs += 1
        on_gpu = gpus(cfg) > 0
        est.gpu_jobs += on_gpu
        est.cpu_jobs += not on_gpu
        if tokens is None:
            est.unknown += 1
            continue
        tokens *= max(1, job.shards)  # the job's shards together
        prompts = prompt_tokens(job, cfg, tokens, mirror, dataset_overrides)
        est.generated_tokens += tokens
        est.prompt_tokens += prompts
        est.flops += 2 * float(cfg["model"]["params"]) * (tokens + prompts)
        if not on_gpu:
            rate = probe_rate(probe_dir, job.model, job.backend)
            rate, how = (rate, "probe") if rate else (DEFAULT_CPU_TOK_S, "assumed")
            est.cpu_rates[(job.model, job.backend)] = (rate, how)
            est.cpu_hours += tokens / rate / 3600
            continue
        throughput = cfg["backend"].get("engine", {}).get("throughput_tok_s")
        if throughput:
            est.gpu_hours += tokens / float(throughput) / 3600
    return est


@dataclass
class FamilyEstimate:
    name: str
    jobs: int = 0
    unknown: int = 0
    generated_tokens: int = 0
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    rates: set = field(default_factory=set)  # (tok/s, "probe" | "assumed") of the CPU jobs

    def add(self, model: str, backend: str, tokens: int | None, probe_dir: Path | None) -> None:
        """One engine job of `model` on `backend` generating at most `tokens`."""
        from retrace.config import compose

        self.jobs += 1
        if tokens is None:
            self.unknown += 1
            return
        self.generated_tokens += tokens
        cfg = compose({"model": model, "backend": backend})
        if gpus(cfg):
            throughput = (cfg["backend"].get("engine") or {}).get("throughput_tok_s")
            self.gpu_hours += tokens / float(throughput) / 3600 if throughput else 0.0
            return
        rate = probe_rate(probe_dir, model, backend)
        rate, how = (rate, "probe") if rate else (DEFAULT_CPU_TOK_S, "assumed")
        self.rates.add((rate, how))
        self.cpu_hours += tokens / rate / 3600

    def line(self) -> str:
        times = [f"≈ {self.gpu_hours:,.1f} GPU-hours"] if self.gpu_hours else []
        if self.rates:
            rates = ", ".join(f"{r:,.0f} tok/s {h}" for r, h in sorted(self.rates))
            times.append(f"≈ {self.cpu_hours:,.1f} h CPU wall time at {rates}")
        unknown = f"; {self.unknown} jobs of unknown size" if self.unknown else ""
        return (
            f"estimate ({self.name}): {self.jobs} engine jobs, ≤ {self.generated_tokens:,} generated tokens, "
            + ("; ".join(times) or "no stated throughput")
            + unknown
        )


def family_lines(experiment: dict, mirror: str | None, probe_dir: Path | None = None) -> list[str]:
    """The method families' estimate lines (retrace.family `estimate_lines`: DRR's, ART's), one
    or more per family block of the experiment; see the module docstring."""
    ctx = Context({}, experiment, mirror, probe_dir)
    return [line for family in FAMILIES.active(ctx) for line in family.estimate_lines(ctx)]
