"""Cost estimate of an experiment before anything runs: `retrace plan --estimate`.

Upper bounds from configuration alone, per job from its own method and roles (retrace.planning.sizing:
per-role caps, best-of-N's real calls, Maj@N' from its refinement partner's bound, prefill,
engine loads, reward scoring): generated tokens, prompt tokens (every call's whole prompt),
FLOPs ≤ 2 × params × (prompt + generated) tokens, nominal (no prefix reuse); GPU-hours from
the GPU-seconds of the jobs the workflow runs (retrace.planning.parts: each cell part on the most GPUs
any of its labels needs, each shard job, an engine load every attempt at max_runtime), at a `retrace probe` result's measured rates where one exists (a GPU
pilot's results/probe/<model>/<backend>.json), else at the backend's stated
`throughput_tok_s` (assumed, and the line says so); CPU wall time = generated tokens / the
engine's decode rate on this machine (the probe's `tok_s`, else DEFAULT_CPU_TOK_S). The token
bound over-counts (chains stop before max_tokens) about as much as the raw decode rate
over-states what a run gets: measured against `make controls` in docs/controls.md.
`equal_compute_line` compares each Maj@N' job's bound with its refinement partner's.

The method families' engine stages are estimated apart (`family_lines`: each registered family's
`estimate_lines`, retrace.config.families): DRR's reasoner jobs (distil, generate) at questions × calls ×
max_tokens (drr/family.py), ART's run and selection jobs at each method's token bound
(art/family.py), each priced with `FamilyEstimate` as above. DRR's
discriminator and SFT-LoRA train for a bounded time, not a number of tokens: their runtime caps
(`drr.runtime`) are listed by `retrace plan --check`, not priced here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from retrace.config.families import FAMILIES, Context
from retrace.planning.devices import gpus
from retrace.planning.plan import Job, job_config
from retrace.planning.workload import DEFAULT_CPU_TOK_S as DEFAULT_CPU_TOK_S  # the workload's, re-exported
from retrace.planning.workload import probe_rate as probe_rate
from retrace.planning.workload import problem_count as problem_count
from retrace.util.registry import METHODS

if TYPE_CHECKING:
    from retrace.planning.cluster import Limit
    from retrace.planning.parts import Sized


@dataclass
class Estimate:
    jobs: int = 0  # labels (model × backend × dataset × label × seed)
    parts: int = 0  # the cell jobs that run the unsharded labels (retrace.planning.parts)
    shard_jobs: int = 0  # data-parallel shard jobs of the sharded labels
    merges: int = 0  # merge jobs: a Maj@N' partner's shards (others merge in their score job)
    unknown: int = 0  # jobs whose problem count could not be known
    stated: int = 0  # jobs sized from their dataset config's stated `questions` (data not read)
    generated_tokens: int = 0
    prompt_tokens: int = 0
    flops: float = 0.0
    gpu_hours: float = 0.0
    gpu_jobs: int = 0
    cpu_hours: float = 0.0  # wall time of the CPU jobs, one after another
    cpu_jobs: int = 0
    cpu_rates: dict = field(
        default_factory=dict
    )  # {(model, backend): (tok/s, "measured by probe" | "assumed")}
    gpu_rates: set = field(default_factory=set)  # "measured by probe" | "assumed" | "none stated"

    def line(self) -> str:
        times = []
        if self.gpu_jobs or not self.cpu_jobs:
            how = {
                "assumed": "rates assumed (the backends' stated throughput; no pilot result yet; the `rates` lines below say per role)"
            }
            rates = "; ".join(how.get(h, f"rates {h}") for h in sorted(self.gpu_rates)) or "no rates"
            times.append(
                f"≈ {self.gpu_hours:,.1f} GPU-hours (decode, prefill, engine loads, reward scoring; {rates})"
            )
        if self.cpu_jobs:
            rates = ", ".join(
                f"{rate:,.0f} tok/s {'measured by probe' if how == 'measured by probe' else 'assumed, no probe yet'}"
                for rate, how in sorted(set(self.cpu_rates.values()))
            )
            times.append(f"≈ {self.cpu_hours:,.1f} h CPU wall time at {rates}")
        return (
            f"estimate: {self.jobs} labels in {self.parts + self.shard_jobs + self.merges} generation jobs "
            f"({self.parts} cell jobs, {self.shard_jobs} shard jobs, {self.merges} merges), "
            f"≤ {self.generated_tokens:,} generated tokens, "
            f"≤ {self.prompt_tokens:,} prompt tokens, ≤ {self.flops / 1e12:,.1f} TFLOPs (prompts included), "
            + "; ".join(times)
            + (f"; {self.unknown} jobs of unknown size" if self.unknown else "")
            + (
                f"; {self.stated} labels sized from their dataset configs' stated question counts (data not read)"
                if self.stated
                else ""
            )
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


def estimate(
    jobs: list[Job],
    mirror: str | None,
    dataset_overrides: tuple = (),
    probe_dir: Path | None = None,
    limit: Limit | None = None,
) -> Estimate:
    """The experiment's bounds as the workflow runs them (retrace.planning.parts.sized: cell parts and
    shard jobs at the partition `limit`); rates from the probe results in `probe_dir` (the
    workflow's results/probe) where they exist."""
    from retrace.planning.parts import sized

    return estimate_of(jobs, sized(jobs, mirror, dataset_overrides, probe_dir, limit))


def estimate_of(jobs: list[Job], s: Sized) -> Estimate:
    """Tokens and FLOPs of every label; GPU-hours of the jobs that run them, each engine load
    of every attempt included (`s.limit`)."""
    from retrace.planning.cells import merge_jobs

    shard_jobs = sum(j.shards for j, _ in s.shards)
    est = Estimate(parts=len(s.parts), shard_jobs=shard_jobs, merges=len(merge_jobs(jobs)))
    for job, b in zip(jobs, s.labels, strict=True):
        est.jobs += 1
        est.gpu_jobs += b.gpus > 0
        est.cpu_jobs += not b.gpus
        if not b.known:
            est.unknown += 1
            continue
        est.stated += b.stated
        est.generated_tokens += b.tokens.generated
        est.prompt_tokens += b.tokens.prompt
        est.flops += 2 * float(job_config(job)["model"]["params"]) * (b.tokens.generated + b.tokens.prompt)
        if b.gpus:
            est.gpu_rates.add(b.rates)
        else:
            est.cpu_rates[(job.model, job.backend)] = (_cpu_rate(s.probe_dir, job), b.rates)
            est.cpu_hours += (b.work_s or 0.0) / 3600
    known = [p for p in s.parts if any(b.known for b in p.labels)]  # unknown size: no time
    gpu_s = sum(p.gpu_seconds(s.limit) for p in known) + sum(
        b.gpu_seconds(s.limit.minutes) or 0.0 for _, b in s.shards
    )
    est.gpu_hours = gpu_s / 3600
    return est


def load_share_line(s: Sized) -> str:
    """`engine-load share of GPU time: X %`: the GPU-seconds of loading engines (every attempt
    of every part and shard job) over all GPU-seconds as sized."""
    from retrace.planning.sizing import ENGINE_LOAD_S

    loading = sum(ENGINE_LOAD_S * p.loads(s.limit) * p.gpus for p in s.parts if p.gpus)
    loading += sum(
        ENGINE_LOAD_S * b.attempts(s.limit.minutes) * b.shards * b.gpus for _, b in s.shards if b.gpus
    )
    total = sum(p.gpu_seconds(s.limit) for p in s.parts) + sum(
        b.gpu_seconds(s.limit.minutes) or 0.0 for _, b in s.shards
    )
    if not total:
        return "engine-load share of GPU time: no GPU jobs"
    share = 100 * loading / total
    return f"engine-load share of GPU time: {share:.1f} % ({loading / 3600:,.0f} of {total / 3600:,.0f} GPU-hours)"


def rate_lines(s: Sized) -> list[str]:
    """One line per model (and reward model): each role's rate at the longest context it
    prices, with its source (pilot, probe or assumed; retrace.planning.rates)."""
    found: dict[str, dict[tuple, int]] = {}
    for b in s.labels:
        for what, role, context, decode, prefill, source in b.rate_detail:
            key = (role, decode, prefill, source)
            mine = found.setdefault(what, {})
            mine[key] = max(mine.get(key, 0), int(context))
    out = []
    for what, rates in found.items():
        parts = [
            f"{role} ≤ {context:,} prompt tokens: {_tok_s(decode)}"
            + (f" decode, {_tok_s(prefill)} prefill" if prefill else (" read" if role == "reward" else ""))
            + f" ({source})"
            for (role, decode, prefill, source), context in sorted(
                rates.items(), key=lambda kv: (kv[0][0], kv[1])
            )
        ]
        out.append(f"rates {what}: " + "; ".join(parts))
    return out


def _tok_s(rate: float | None) -> str:
    return f"{rate:,.0f} tok/s" if rate else "? tok/s"


def _cpu_rate(probe_dir: Path | None, job: Job) -> float:
    return probe_rate(probe_dir, job.model, job.backend) or DEFAULT_CPU_TOK_S


def equal_compute_line(jobs: list[Job], mirror: str | None, dataset_overrides: tuple = ()) -> str | None:
    """`equal-compute bounds, baseline/refine: min X, max Y` over every Maj@N' job (None: none)."""
    from retrace.planning.sizing import equal_compute_ratios, job_bounds

    ratios = [r for _, r in equal_compute_ratios(job_bounds(jobs, mirror, dataset_overrides))]
    if not ratios:
        return None
    return f"equal-compute bounds, baseline/refine: min {min(ratios):.2f}, max {max(ratios):.2f} ({len(ratios)} pairs)"


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
        from retrace.config.compose import compose

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
    """The method families' estimate lines (retrace.config.families `estimate_lines`: DRR's, ART's), one
    or more per family block of the experiment; see the module docstring."""
    ctx = Context({}, experiment, mirror, probe_dir)
    return [line for family in FAMILIES.active(ctx) for line in family.estimate_lines(ctx)]
