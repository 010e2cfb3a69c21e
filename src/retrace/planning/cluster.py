"""Cluster resources of a generation job, sized from its model, backend and workload.

The rules that load an LLM ask for these (workflow/rules/generate.smk); Snakemake's SLURM
executor (profiles/slurm) turns them into `sbatch --gpus N --mem M -t T`. Local runs ignore
`gpu` and `runtime`. Everything here is an upper-bound guess from configuration; a
cluster's own limits win through `set-resources` in the profile.

No job asks for more runtime than the partition allows (`max_runtime` in config/config.yaml,
minutes; `capped`): a job estimated longer asks for the limit, SLURM ends it there, and its
retry (profiles/slurm `retries`) resumes from the request cache, which holds every request
the killed attempt finished. `retrace plan --check` lists those jobs (`over_limit`) and fails
when one needs more attempts than the profile allows, or cannot resume (a DM training); a
cell's labels are cut into parts that keep one of those attempts for faults (`Limit`,
retrace.planning.parts), and a label too long for any part fails.

    gpu      vLLM: the engine's tensor_parallel_size (one engine spans that many GPUs);
             hf on cuda: 1; CPU engines (llama.cpp, hf on cpu, openai clients): 0
    mem_mb   host memory: the weights as loaded (bf16 on GPU engines, ~4.5-bit GGUF on
             llama.cpp) × 1.5, plus 2 GB for the runtime; never below 4000 MB (a `served`
             client's: 4000 MB, the engine is in `retrace serve`'s own job)
    runtime  minutes: the job's bound (retrace.planning.sizing: its method's and roles' tokens, prefill,
             reward scoring, at the probe's measured or the backend's stated rates, over the GPUs
             of a tensor-parallel engine) × 1.5 + 30 min for loading; 60 min when the rate or
             the problem count is unknown. `runtime_min` (tokens at the stated throughput) is
             what the DRR and ART families use
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from retrace.config.families import FAMILIES, Context
from retrace.planning.devices import gpus as gpus  # where it lives: below estimate, which uses it too
from retrace.planning.plan import Job, job_config
from retrace.util.yamlfile import load_yaml

if TYPE_CHECKING:
    from retrace.planning.sizing import JobBound

BYTES_PER_PARAM = {"gpu": 2.0, "gguf": 0.6}  # bf16; Q4_K_M/Q4_1 average ~4.5-5 bits
MIN_MEM_MB, RUNTIME_OVERHEAD_MIN, DEFAULT_RUNTIME_MIN = 4000, 30, 60


def threads(cfg: dict) -> int:
    """CPU threads a generation job asks for: its engine's `n_threads` (llama.cpp's, the
    simulated engine's 1), 2 when the engine states none."""
    return int((cfg["backend"].get("engine") or {}).get("n_threads") or 2)


def mem_mb(cfg: dict) -> int:
    if cfg["backend"]["name"] == "served":  # a client: the weights live in the server's job
        return MIN_MEM_MB
    per_param = BYTES_PER_PARAM["gpu" if gpus(cfg) else "gguf"]
    weights_mb = float(cfg["model"]["params"]) * per_param / 1e6
    return max(MIN_MEM_MB, math.ceil(weights_mb * 1.5) + 2000)


def runtime_min(cfg: dict, tokens: int | None) -> int:
    throughput = (cfg["backend"].get("engine") or {}).get("throughput_tok_s")
    if not tokens or not throughput:
        return DEFAULT_RUNTIME_MIN
    from retrace.planning.devices import reward_gpus

    seconds = tokens / (float(throughput) * max(1, gpus(cfg) - reward_gpus(cfg)))  # tensor-parallel GPUs only
    return math.ceil(seconds * 1.5 / 60) + RUNTIME_OVERHEAD_MIN


def job_resources(
    job: Job,
    mirror: str | None,
    dataset_overrides: tuple = (),
    planned: list[Job] | None = None,
    probe_dir: Path | None = None,
) -> dict:
    """{gpu, mem_mb, runtime} of one generation job (see the module docstring); `planned`: the
    experiment's jobs, where a Maj@N' job finds the refinement it is priced from."""
    from retrace.planning.sizing import job_bound

    return bound_resources(job, job_bound(job, mirror, dataset_overrides, probe_dir, planned or [job]))


def bound_resources(job: Job, bound: JobBound) -> dict:
    """{gpu, mem_mb, runtime} of a generation job whose bound is already sized (the workflow
    reads each job's from the experiment's one sizing, retrace.planning.parts.sized, rather
    than sizing every job again: each asked for its partner among all jobs, quadratic)."""
    cfg = job_config(job)
    return {"gpu": gpus(cfg), "mem_mb": mem_mb(cfg), "runtime": bound.minutes() or DEFAULT_RUNTIME_MIN}


def rule_resources(job: Job, bound: JobBound, max_runtime: int | None) -> dict[str, int]:
    """{threads, gpu, mem_mb, runtime} a generation job's rule asks for: its engine's threads and
    its bound's resources, the runtime capped at the partition's limit (retrace.planning.rule_groups)."""
    out = bound_resources(job, bound)
    return {**out, "threads": threads(job_config(job)), "runtime": capped(out["runtime"], max_runtime)}


def capped(minutes: int, limit: int | None) -> int:
    """A runtime request (minutes) no longer than the partition's limit (None: no limit)."""
    return min(int(minutes), int(limit)) if limit else int(minutes)


@dataclass(frozen=True)
class Limit:
    """What a generation job may take: `minutes` a run (the partition's MaxTime, `max_runtime`
    in config/config.yaml; None: no limit) and `attempts` runs (the SLURM profile's `retries`
    + 1), each resuming from the request cache. The workflow and `retrace plan` read both from
    the same places (`limit`), so they cut cells into the same parts (retrace.planning.parts)."""

    minutes: int | None = None
    attempts: int = 1

    def per_part(self) -> int:
        """Attempts a cell part may need: one retry is kept for faults (a preemption, a lost
        node), unless the profile allows a single attempt."""
        return max(1, self.attempts - 1)


def slurm_profile(root: Path) -> Path:
    """profiles/slurm under `root` (a run directory's own), else this checkout's."""
    from retrace.config.compose import CONFIG_DIR

    beside = root / "profiles" / "slurm"
    return beside if (beside / "config.yaml").is_file() else CONFIG_DIR.parent / "profiles" / "slurm"


def limit(global_cfg: dict, profile: Path) -> Limit:
    """The partition limit (`max_runtime`) and the attempts the profile's `retries` allow."""
    minutes = global_cfg.get("max_runtime")
    retries = int(_profile(profile).get("retries") or 0)
    return Limit(int(minutes) if minutes else None, retries + 1)


@dataclass(frozen=True)
class OverLimit:
    """A job whose estimated runtime exceeds the partition limit."""

    rule: str
    where: str
    minutes: int
    resumes: bool  # it commits finished requests to the request cache, so a retry goes on
    overhead: int = 0  # minutes every attempt spends before it resumes (engine load)
    kept: int = 0  # attempts kept for faults (a cell part keeps one: Limit.per_part)
    hint: str = ""  # what to change when it fails (a cell part's label: give it shards)

    def attempts(self, limit: int) -> int:
        if self.overhead >= limit:
            return 10**9  # no attempt gets past loading
        return math.ceil((self.minutes - self.overhead) / (limit - self.overhead))

    def line(self, limit: int, retries: int) -> str:
        if self.overhead >= limit:
            how = f"each attempt spends {self.overhead} min loading its engine: raise max_runtime"
        elif not self.resumes:
            how = "it cannot resume, so every retry starts over: raise max_runtime or shorten it"
        else:
            kept = f" ({self.kept} kept for faults)" if self.kept else ""
            how = (
                f"asks for {limit} min and resumes from the request cache on each retry: "
                f"{self.attempts(limit)} attempts, the profile allows {retries + 1}{kept}"
            )
            if self.hint and self.fails(limit, retries):
                how += f"; {self.hint}"
        return f"{self.rule} {self.where}: estimated {self.minutes} min > max_runtime {limit} min; {how}"

    def fails(self, limit: int, retries: int) -> bool:
        return not self.resumes or self.attempts(limit) > max(1, retries + 1 - self.kept)


def over_limit(
    global_cfg: dict, limit: int, probe_dir: Path | None = None, attempts: int = 1
) -> list[OverLimit]:
    """The jobs of every method family (retrace.config.families `runtimes`: the spine's generation jobs
    first, then DRR's and ART's) whose estimated runtime exceeds `limit` minutes; `attempts`:
    what the profile allows (the spine cuts its cells into parts by it, retrace.planning.parts)."""
    from retrace.planning.plan import load_experiment

    experiment = load_experiment(global_cfg["experiment"])
    ctx = Context(global_cfg, experiment, global_cfg.get("mirror"), probe_dir, Limit(limit, attempts))
    return [o for family in FAMILIES.active(ctx) for o in family.runtimes(ctx) if o.minutes > limit]


def _profile(profile: Path) -> dict:
    path = profile / "config.yaml"
    return (load_yaml(path) or {}) if path.is_file() else {}


def runtime_check(global_cfg: dict, profile: Path) -> list[tuple[str, bool]]:
    """(line, fails) for each job over `max_runtime`, for `retrace plan --check`; `profile`
    (profiles/slurm) gives the retries, and the runtime of the rules that set none."""
    if not global_cfg.get("max_runtime"):
        return []  # no limit: every job runs to its end
    limit, settings = int(global_cfg["max_runtime"]), _profile(profile)
    retries = int(settings.get("retries") or 0)
    found = over_limit(global_cfg, limit, attempts=retries + 1)
    out = [(o.line(limit, retries), o.fails(limit, retries)) for o in found]
    default = int((settings.get("default-resources") or {}).get("runtime") or 0)
    if default > limit:
        out.append(
            (f"{profile}/config.yaml: default-resources runtime {default} min > max_runtime {limit}", True)
        )
    return out
