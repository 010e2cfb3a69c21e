"""Expand an experiment into jobs, and compute each job's rerun key.

One job = model × backend × dataset × method × seed: the engine is loaded once per job,
never once per problem. Snakemake does not see the Python modules a rule imports, so each
rule carries `rerun_key(stage, job)` in its params: a hash of the stage's config slice, the
source files it runs and the prompt templates it reads. Engine settings (threads, slots)
are deliberately left out: they change speed, not results.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from retrace.config.compose import CONFIG_DIR, compose, load_experiment
from retrace.config.settings import (
    JobSettings,
    backend_settings,
    dataset_settings,
    method_settings,
)
from retrace.planning import closure
from retrace.util.hashing import hash_sources, sha256_json
from retrace.util.registry import BACKENDS

PKG = Path(__file__).resolve().parents[1]  # the retrace package
# Each stage's code is the import closure of its entry module (retrace.planning.closure, which lists
# what is left out and why: provenance, audit, config composition, this module), plus the
# plugins its config names, closed over the same way.
STAGES = ("model", "probe", "data", "generate", "score", "diagnose", "claims", "report")
# Stages whose output depends on the engine that runs the model: its package versions join the key.
ENGINE_STAGES = ("probe", "generate")


@dataclass(frozen=True)
class Job:
    model: str
    backend: str
    dataset: str
    label: str  # the method as named in paths (a method plus overrides may get its own label)
    method: str  # the config/method/<name>.yaml it uses
    seed: int
    overrides: tuple[str, ...] = field(default=())
    # (refine label, majority label, "effective"|"nominal"): this job is Maj@N' with N' priced
    # from those two jobs' measured tokens (the refinement critics' equal-compute baseline).
    equal_compute: tuple[str, ...] = field(default=())
    # Data-parallel shards (`shards: K` in the run): K generation jobs of 1/K of the problems
    # each, merged into this job's generations file (retrace.store.shards).
    shards: int = 1

    @property
    def path(self) -> str:
        return f"{self.model}/{self.backend}/{self.dataset}/{self.label}/seed{self.seed}"

    @property
    def cell(self) -> str:
        """The cell's folder under scores/ and diagnostics/: one score job writes all of it."""
        return f"{self.model}/{self.backend}/{self.dataset}/seed{self.seed}"

    @property
    def scored(self) -> str:
        """This job's scores (and diagnostics) under their kind: `<cell>/<label>`. A folder per
        cell, not a file per label, is what the workflow declares: at paper scale each declared
        file costs Snakemake's planner time (issue 57)."""
        return f"{self.cell}/{self.label}"

    def selections(self) -> dict[str, str]:
        return {"model": self.model, "backend": self.backend, "dataset": self.dataset, "method": self.method}

    def config(self) -> dict:
        """The resolved config of this job (a fresh dict each call; composing is cached)."""
        cfg = compose(self.selections(), self.overrides)
        cfg["seed"] = self.seed
        return cfg

    def settings(self) -> JobSettings:
        """The job's method, dataset and backend settings, typed and checked once
        (retrace.config.settings): a bad key or type is one ConfigError naming file and key."""
        return job_settings(self)

    def cli_args(self) -> str:
        args = [
            f"--model {self.model}",
            f"--backend {self.backend}",
            f"--dataset {self.dataset}",
            f"--method {self.method}",
            f"--label {self.label}",
            f"--seed {self.seed}",
        ]
        args += [f"--override '{o}'" for o in self.overrides]
        return " ".join(args)


@functools.cache
def job_settings(job: Job) -> JobSettings:
    """`job.settings()`, built once per process (a Job is frozen; its config is composed)."""
    cfg = job.config()
    backend = BACKENDS.get(cfg["backend"]["name"])
    return JobSettings(
        method=method_settings(cfg["method"], f"config/method/{job.method}.yaml"),
        dataset=dataset_settings(cfg["dataset"], f"config/dataset/{job.dataset}.yaml"),
        backend=backend_settings(cfg["backend"], backend.engine_keys(), f"config/backend/{job.backend}.yaml"),
    )


def _method_entries(methods: list) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...], object]]:
    """(label, method, overrides, equal_compute, shards) of each method entry; shards None =
    the run's own (a label alone may be split, e.g. a long Maj@N' at nominal compute)."""
    out: list[tuple[str, str, tuple[str, ...], tuple[str, ...], object]] = []
    for m in methods:
        if isinstance(m, str):
            out.append((m, m, (), (), None))
            continue
        eq = m.get("equal_compute") or {}
        eq_t = (eq["refine"], eq["majority"], eq.get("kind", "effective")) if eq else ()
        over = tuple(m.get("overrides", ()))
        out.append((m["label"], m.get("method", m["label"]), over, eq_t, m.get("shards")))
    return out


def _shards(value: object, experiment: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"experiment {experiment!r}: shards must be a positive integer, got {value!r}")
    return value


def jobs(global_cfg: dict, config_dir: Path = CONFIG_DIR) -> list[Job]:
    """All jobs of the experiment named in the global config, in a stable order (read from
    `config_dir`: retrace.deviations.effect resolves them from a switched copy)."""
    name = global_cfg["experiment"]
    # the one-argument call where config/ is the repository's (what tests replace it with)
    exp = load_experiment(name) if config_dir == CONFIG_DIR else load_experiment(name, config_dir)
    switch, extra = backend_switch(tuple(global_cfg.get("overrides") or ()))
    out: list[Job] = []
    for run in exp["runs"]:
        run_over = tuple(run.get("overrides", ()))
        if switch:
            run, run_over = switched(run, run_over, switch, global_cfg["experiment"])
        for o in run_over:
            if o.lstrip("+~").startswith(("dataset.", "model.")):
                # Data and model artifacts are shared by every run that names them.
                raise ValueError(
                    f"experiment {global_cfg['experiment']!r}: override {o!r} changes a shared "
                    "dataset/model; put it in a config/dataset|model file or the global `overrides`"
                )
        run_over += extra
        run_shards = _shards(run.get("shards", 1), global_cfg["experiment"])
        for model in run["models"]:
            for dataset in run["datasets"]:
                for label, method, over, eq, own in _method_entries(run["methods"]):
                    shards = run_shards if own is None else _shards(own, global_cfg["experiment"])
                    for seed in run.get("seeds", [0]):
                        out.append(
                            Job(
                                model,
                                run["backend"],
                                dataset,
                                label,
                                method,
                                int(seed),
                                run_over + over,
                                eq,
                                shards,
                            )
                        )
    labels: dict[tuple, Job] = {}
    for j in out:  # one label must mean one method configuration everywhere
        prev = labels.setdefault((j.model, j.backend, j.dataset, j.label, j.seed), j)
        if prev != j:
            raise ValueError(
                f"experiment {global_cfg['experiment']!r}: label {j.label!r} is used for "
                f"two different method configurations; give them distinct labels"
            )
    return list(dict.fromkeys(out))


SERVED_ENGINES = ("llamacpp", "vllm")  # what `retrace serve` runs (retrace.app.serve)


def backend_switch(overrides: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(the backend a global `backend=NAME` override puts every run on, the other overrides):
    `retrace run --set backend=served` makes an experiment's runs clients of `retrace serve`."""
    switch = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].strip() == "backend"]
    return (switch[-1].strip() if switch else None), tuple(
        o for o in overrides if o.split("=", 1)[0].strip() != "backend"
    )


def switched(
    run: dict, run_over: tuple[str, ...], backend: str, experiment: str
) -> tuple[dict, tuple[str, ...]]:
    """A run moved onto `backend`; onto `served`, its engine becomes the server's
    (`backend.engine.server`) and its engine settings (context length, memory share, tensor
    parallelism) the settings its server must have (config/backend/served.yaml)."""
    if backend == run["backend"]:
        return run, run_over
    if backend != "served":
        return {**run, "backend": backend}, run_over
    if run["backend"] not in SERVED_ENGINES:
        raise ValueError(
            f"experiment {experiment!r}: backend=served: a run on {run['backend']!r} has no server "
            f"(`retrace serve` runs {' or '.join(SERVED_ENGINES)})"
        )
    return {**run, "backend": "served"}, (f"backend.engine.server={run['backend']}", *run_over)


def shared_overrides(global_cfg: dict, group: str) -> tuple[str, ...]:
    """Global overrides of one shared group (dataset or model), applied to its own stage."""
    return tuple(o for o in global_cfg.get("overrides") or () if o.lstrip("+~").startswith(group + "."))


def shared_key(stage: str, name: str, global_cfg: dict) -> str:
    """Rerun key of a shared stage ("model" or "data") for model/dataset `name`."""
    group = {"model": "model", "data": "dataset"}[stage]
    cfg = compose({group: name}, shared_overrides(global_cfg, group))
    return rerun_key(stage, cfg)


def diagnosed(job: Job) -> bool:
    """Whether a job gets per-depth diagnostics (retrace.stages.diagnose): refinement jobs."""
    return job.method == "refine"


def planned_files(global_cfg: dict, results: Path, kind: str, suffix: str, only=None) -> list[Path]:
    """`results/<kind>/<cell>/<label><suffix>` (scores, diagnostics) of each planned job (those
    `only(job)` keeps), in plan order."""
    return [results / kind / f"{j.scored}{suffix}" for j in jobs(global_cfg) if only is None or only(j)]


def cell_jobs(jobs_: list[Job], model: str, backend: str, dataset: str, seed: int) -> list[Job]:
    """The jobs of one model × backend × dataset × seed, in plan order (scored together)."""
    return [
        j for j in jobs_ if (j.model, j.backend, j.dataset, j.seed) == (model, backend, dataset, int(seed))
    ]


def merged_in_score(cell: list[Job] | tuple[Job, ...]) -> tuple[Job, ...]:
    """The cell's sharded jobs whose shards its score job merges (retrace.stages.score_cell)
    before scoring them: every sharded job but a Maj@N' partner, whose merged generations a
    generation job of the cell reads (those rule `generate` merges). Merging is joining files in
    the problems' order; a job of its own for it was an eighth of a paper-scale plan (issue 57)."""
    partners = {label for j in cell for label in j.equal_compute[:2]}
    return tuple(j for j in cell if j.shards > 1 and j.label not in partners)


@dataclass(frozen=True)
class ScoreGroup:
    """Cells (model × backend × dataset × seed) with the same labels: every (dataset, seed) of
    `datasets` × `seeds` on `model` and `backend` holds exactly the jobs `labels` (`diagnosed`
    among them, and `merged`: (label, shards) of those whose shards the score job merges), and
    no other cell does, so one rule with these wildcard values scores them and no two rules can
    make the same file (workflow/rules/score.smk)."""

    model: str
    backend: str
    labels: tuple[str, ...]
    diagnosed: tuple[str, ...]
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    merged: tuple[tuple[str, int], ...] = ()


def score_groups(jobs_: list[Job]) -> list[ScoreGroup]:
    """The experiment's cells, grouped into ScoreGroups (in plan order)."""
    labels: dict[tuple, list[Job]] = {}
    for j in jobs_:
        labels.setdefault((j.model, j.backend, j.dataset, j.seed), []).append(j)
    items = []
    for (model, backend, dataset, seed), cell in labels.items():
        names = (
            tuple(j.label for j in cell),
            tuple(j.label for j in cell if diagnosed(j)),
            tuple((j.label, j.shards) for j in merged_in_score(cell)),
        )
        items.append(((model, backend, names), dataset, seed))
    return [
        ScoreGroup(m, b, names[0], names[1], ds, ss, names[2]) for (m, b, names), ds, ss in by_seeds(items)
    ]


def by_seeds(items: Iterable[tuple[tuple, str, int]]) -> list[tuple[tuple, tuple[str, ...], tuple[int, ...]]]:
    """(key, dataset, seed) items as (key, datasets, seeds), in order of appearance: a key's
    datasets that have the same seeds together, so that datasets × seeds is exactly the key's
    items (the workflow's rules per group: score groups here, retrace.planning.rule_groups)."""
    seeds: dict[tuple, list[int]] = {}
    for key, dataset, seed in items:
        seeds.setdefault((key, dataset), []).append(seed)
    groups: dict[tuple, list[str]] = {}
    for (key, dataset), found in seeds.items():
        groups.setdefault((key, tuple(found)), []).append(dataset)
    return [(key, tuple(ds), ss) for (key, ss), ds in groups.items()]


def sibling(job: Job, label: str) -> Job:
    """The job with another method label on the same model, backend, dataset and seed."""
    return Job(job.model, job.backend, job.dataset, label, "", job.seed)


def find(jobs_: list[Job], **wildcards: str) -> Job:
    for j in jobs_:
        if all(str(getattr(j, k)) == str(v) for k, v in wildcards.items()):
            return j
    raise KeyError(f"no job matches {wildcards}")


def _plugin_files(kind: str, name: str) -> list[Path]:
    from retrace.util.registry import BACKENDS, METHODS, TASKS

    reg = {"backend": BACKENDS, "method": METHODS, "task": TASKS}[kind]
    return [Path(f) for f in reg.module_files(name)]


def _plugins(stage: str, cfg: dict | None) -> tuple[tuple[str, str], ...]:
    """(kind, name) of each plugin whose code a stage runs, as `cfg` names them (none without
    a config: the stage's own module only)."""
    if cfg is None:
        return ()
    out: list[tuple[str, str]] = []
    if stage in ("data", "score", "diagnose"):  # loading and judging code; prompts are templates
        out.append(("task", cfg["dataset"]["task"]))
    if stage in ("generate", "probe"):
        out.append(("backend", cfg["backend"]["name"]))
    if stage == "generate":
        out.append(("method", cfg["method"]["name"]))
        if cfg["method"].get("carry_forward"):  # refinement then consults the task's extractor
            out.append(("task", cfg["dataset"]["task"]))
    return tuple(out)


# Planning asks for the entries and sources of every job's stages (tens of thousands at paper
# scale); they depend only on the stage and its plugins, so each combination is closed once.
@functools.cache
def _entries(stage: str, plugins: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    files = [f for kind, name in plugins for f in _plugin_files(kind, name)]
    # Every method's requests start from Task.prompt (methods/base.py task_prompt), which the
    # stage reaches through the registry, not an import; its module and what it uses are hashed.
    prompt = ("retrace.tasks.base:Task",) if stage == "generate" else ()
    return (f"retrace.stages.{stage}", *prompt, *closure.plugin_modules(files))


def stage_entries(stage: str, cfg: dict | None = None) -> tuple[str, ...]:
    """Entry modules of a stage: its module in retrace.stages, and the plugins `cfg` names."""
    return _entries(stage, _plugins(stage, cfg))


def stage_sources(stage: str, cfg: dict | None = None) -> list[Path]:
    """Source and data files a stage's output depends on (retrace.planning.closure)."""
    if stage not in STAGES:
        raise KeyError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
    return closure.code_files(stage_entries(stage, cfg))


def templates(cfg: dict) -> list[Path]:
    """Prompt templates a generation job reads (named in the dataset and method configs)."""
    from retrace.util.registry import TASKS

    dataset_template = cfg["dataset"].get("template") or TASKS.get(cfg["dataset"]["task"]).default_template
    names = [dataset_template] + list((cfg["method"].get("templates") or {}).values())
    return list(_template_paths(tuple(names), _prompts_dir()))


def _prompts_dir() -> Path:
    from retrace.util import templates as t

    return t.PROMPTS_DIR  # read at each call: a test may point it at another folder


@functools.cache
def _template_paths(names: tuple[str, ...], prompts_dir: Path) -> tuple[Path, ...]:
    from retrace.util.templates import template_path

    return tuple(template_path(n) for n in names)


@functools.cache
def _code_files(entries: tuple[str, ...], tmpl: tuple[Path, ...]) -> tuple[Path, ...]:
    """A stage's code (its entries' closure) and the templates it reads, sorted: once per
    combination, not once per job (sorting paths was a tenth of a paper-scale plan's keys)."""
    return tuple(sorted(closure.code_files(entries) + list(tmpl)))


@functools.cache
def _sources_hash(stage: str, files: tuple[Path, ...]) -> str:
    return hash_sources(files)


def engine_rerun_settings(backend: dict) -> dict:
    """A composed backend config's settings that change outputs (Backend.rerun_settings:
    deterministic mode; the simulated engine's planted effects), {} for most engines."""
    from retrace.util.registry import BACKENDS

    return BACKENDS.get(backend["name"]).rerun_settings(backend.get("engine") or {})


def backend_rerun_settings(name: str, overrides: Iterable[str] = ()) -> dict:
    """engine_rerun_settings of backend `name` composed with its `backend.*` overrides (the ART
    block's, none for DRR's reasoner); the effects file is read anew each call."""
    engine = [o for o in overrides if o.lstrip("+~").startswith("backend.")]
    return engine_rerun_settings(compose({"backend": name}, engine)["backend"])


def _made_by(dataset: dict) -> dict:
    """A dataset config less its stated `questions` count: a count for planning without the
    data (scoring.design), checked against the data, that changes nothing a job makes."""
    return {k: v for k, v in dataset.items() if k != "questions"}


def config_slice(stage: str, cfg: dict) -> dict:
    """The part of a job's config that can change a stage's output."""
    if stage == "model":
        return {"model": cfg["model"]}
    if stage == "data":
        return {"dataset": _made_by(cfg["dataset"])}
    if stage == "generate":
        out = {
            "model": cfg["model"],
            "dataset": _made_by(cfg["dataset"]),
            "method": cfg["method"],
            "backend": cfg["backend"]["name"],
            "seed": cfg["seed"],
        }
        out.update(engine_rerun_settings(cfg["backend"]))
        return out
    if stage == "probe":  # the raw rate depends on the engine's settings, not on the method
        return {"model": cfg["model"]["name"], "backend": cfg["backend"]}
    if stage in ("score", "diagnose"):
        return {"task": cfg["dataset"]["task"], "scoring": cfg["method"].get("scoring", {})}
    if stage == "claims":  # the experiment's pre-registered comparisons
        return {"claims": cfg.get("claims") or {}}
    return {}


@functools.cache
def job_config(job: Job) -> dict:
    """job.config(), composed once per process and shared by every caller, read-only (a change
    is a TypeError: retrace.util.frozen). Planning reads each job's config several times (rerun
    keys, resources, the estimate), for tens of thousands of jobs at paper scale."""
    from retrace.util.frozen import FrozenDict

    # as Job.config: the composition, then the seed; the composition (frozen) is shared by the
    # jobs that differ only in seed or label, and composed and frozen once for them all
    out = FrozenDict(_frozen_composition(tuple(sorted(job.selections().items())), job.overrides))
    dict.__setitem__(out, "seed", job.seed)
    return out


@functools.cache
def _frozen_composition(selections: tuple, overrides: tuple[str, ...]) -> dict:
    from retrace.util.frozen import freeze

    return freeze(compose(dict(selections), overrides))


@functools.cache
def job_rerun_key(stage: str, job: Job) -> str:
    """rerun_key for a job, computed once per process (a DAG asks several times per job)."""
    return rerun_key(stage, job_config(job))


def rerun_key(stage: str, cfg: dict) -> str:
    if stage not in STAGES:
        raise KeyError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
    tmpl = tuple(templates(cfg)) if stage == "generate" else ()
    files = _code_files(stage_entries(stage, cfg), tmpl)
    key = {"config": config_slice(stage, cfg), "code": _sources_hash(stage, files)}
    if stage in ENGINE_STAGES:
        key["engine"] = closure.engine_versions(cfg["backend"]["name"])
    return sha256_json(key)


def cell_rerun_key(cell: tuple[Job, ...]) -> str:
    """Rerun key of a score-cell job: its jobs' score keys (and diagnose keys of those it
    diagnoses, generate keys of those it merges), in order, and the code of the driver that runs
    them (retrace.stages.score_cell)."""
    driver = closure.module_file("retrace.stages.score_cell")
    key = {
        "score": [(j.label, job_rerun_key("score", j)) for j in cell],
        "diagnose": [(j.label, job_rerun_key("diagnose", j)) for j in cell if diagnosed(j)],
        "driver": _sources_hash("score_cell", (driver,)),
    }
    merged = merged_in_score(cell)
    if merged:  # the merges it makes, keyed as rule generate keys its own (a cell without: as before)
        key["merge"] = [(j.label, job_rerun_key("generate", j)) for j in merged]
    return sha256_json(key)
