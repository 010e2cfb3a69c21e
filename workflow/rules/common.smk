# Shared helpers for the rules: the job plan and rerun keys come from retrace.plan.
import shlex
import sys

from snakemake.utils import validate

from retrace import plan as _plan
from retrace.config import check_global

config.update(check_global(config))  # unknown keys are refused, naming the valid ones
validate(config, "../schemas/config.schema.yaml")

PY = sys.executable  # the interpreter running Snakemake also runs the stages
RESULTS = "results"
CACHE = f"{RESULTS}/cache/requests.sqlite"
JOBS = _plan.jobs(config)
JOB_PATH = "{model}/{backend}/{dataset}/{label}/seed{seed}"


wildcard_constraints:
    model=r"[^/]+",
    backend=r"[^/]+",
    dataset=r"[^/]+",
    label=r"[^/]+",
    seed=r"\d+",


def job_of(w):
    return _plan.find(JOBS, model=w.model, backend=w.backend, dataset=w.dataset,
                      label=w.label, seed=w.seed)


def job_key(stage):
    return lambda w: _plan.rerun_key(stage, job_of(w).config())


def shared_args(group):
    return " ".join(f"--override {shlex.quote(o)}" for o in _plan.shared_overrides(config, group))


def all_outputs(kind, suffix, method=None):
    return [f"{RESULTS}/{kind}/{j.path}{suffix}" for j in JOBS if method in (None, j.method)]
