"""ART's stages (called by workflow/rules/art.smk through `retrace art …`, see art/cli.py).

- select: which library tasks an unseen task's prompts use (selection JSON).
- run: one job (model × task × method label × seed): problems → rows with traces.
Both read the experiment's `art:` block; every artifact gets a provenance record whose
inputs include the data, the model manifest and exactly the library files it read.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

from retrace.art import overlap, plan, unseen
from retrace.art.baselines import METHOD_FNS, Context, Settings
from retrace.art.library import EVAL_TASKS, eval_tasks, load_library
from retrace.config.compose import compose, load_experiment
from retrace.engine.llm import CachedLLM
from retrace.store import data, models
from retrace.store.cache import RequestCache
from retrace.store.provenance import Provenance
from retrace.util.atomic import write_json, write_jsonl
from retrace.util.registry import BACKENDS, TASKS

log = logging.getLogger(__name__)


def art_config(experiment: str) -> dict:
    block = load_experiment(experiment).get("art")
    if not block:
        raise ValueError(f"experiment {experiment!r} has no `art:` block")
    return plan.check(block, where=f"config/experiment/{experiment}.yaml: art")


def split(
    problems: list, pool: int, examples: int, seed: int, exclude: dict | None = None
) -> tuple[list, list]:
    """(held-out pool, test problems): a seeded shuffle, the pool first, then the test items.
    Problems whose input a library demonstration shows (`exclude`, art/overlap.py) are left
    out before the shuffle, so a task without such overlap splits as before. `examples` is a
    cap: a task with fewer problems than pool + examples (MMLU subjects of 100 questions against
    art_paper's 10 + 100) is tested on all the rest, logged, and the run's records show the n."""
    if exclude:
        problems, _ = overlap.exclude(problems, exclude)
    if len(problems) <= pool:
        raise ValueError(f"{len(problems)} problems cannot give {pool} held-out items and any test item")
    if len(problems) < pool + examples:
        log.warning(
            "%d problems: %d held out, %d test items (of %d asked)",
            len(problems),
            pool,
            len(problems) - pool,
            examples,
        )
    order = list(range(len(problems)))
    random.Random(seed).shuffle(order)
    picked = [problems[i] for i in order[: pool + examples]]
    return picked[:pool], picked[pool:]


def task_split(cfg: dict, problems: list) -> tuple[list, list]:
    return split(problems, cfg["pool"], cfg["examples"], cfg["split_seed"], plan.library_inputs(cfg))


def _llm(cfg: dict, model: str, manifest_path: Path, cache_path: Path, job: str, simulated: dict):
    """(CachedLLM, cache, manifest, backend config); the simulated engine (retrace rehearse,
    art/simulated.py) answers from `simulated`: the task's problems file, task and job label."""
    manifest = models.load_manifest(manifest_path)
    composed = compose({"model": model, "backend": cfg["backend"]}, cfg.get("overrides") or ())
    backend_cls, engine = BACKENDS.get(composed["backend"]["name"]), composed["backend"].get("engine", {})
    if composed["backend"]["name"] == "simulated":
        engine = composed["backend"]["engine"] = {**engine, **simulated}
    cache = RequestCache(cache_path, job=job)
    llm = CachedLLM(
        lambda: backend_cls(manifest, engine),
        composed["backend"]["name"],
        manifest,
        cache,
        identity=backend_cls.identity(manifest, engine),
    )
    return llm, cache, manifest, composed["backend"]


def _task_data(cfg: dict, task: str, data_path: Path):
    ds_cfg = compose({"dataset": plan.dataset_of(task, cfg)})["dataset"]
    return TASKS.get(ds_cfg["task"]), data.read_problems(data_path)


def _tools(cfg: dict, llm) -> dict:
    from retrace.tools import TOOLS

    settings = plan.tool_settings(cfg)
    return {name: TOOLS.get(name)(settings.get(name), llm=llm) for name in TOOLS.names()}


def _demos(cfg: dict, version: str, names: list[str]) -> list[str]:
    lib = load_library(plan.version_dirs(cfg, version))
    k = Settings.of(cfg["settings"]).demos_per_task
    return [d for n in names for d in lib.tasks[n].demos[:k]]


def select(
    experiment: str,
    model: str,
    task: str,
    version: str,
    data_path: Path,
    manifest: Path,
    cache_path: Path,
    out: Path,
) -> dict:
    from retrace.art import select as sel

    cfg = art_config(experiment)
    lib = load_library(plan.version_dirs(cfg, version))
    index = {k: (t.cluster, t.description) for k, t in lib.tasks.items()}
    task_plugin, problems = _task_data(cfg, task, data_path)
    pool, _ = task_split(cfg, problems)
    from retrace.art.metrics import format_input

    examples = [format_input(p) for p in pool]
    desc = eval_tasks()[task]["description"]
    strategy, n = cfg["selection"], cfg["n_tasks"]
    inputs = [str(data_path)] + [str(p) for p in plan.selection_inputs(cfg, version)]
    inputs += [str(p) for p in plan.select_tool_data(cfg)]
    extra = {}
    if strategy == "similarity":
        result = sel.similarity(index, desc, examples, n)
    else:
        sim = {"problems": str(data_path), "dataset": task, "label": "art"}  # selection runs ART
        llm, cache, man, backend = _llm(cfg, model, manifest, cache_path, str(out), sim)
        inputs.append(str(manifest))
        try:
            if strategy == "llm_similarity":
                from retrace.art.program import parse

                lib_ex = {k: parse(t.demos[0]).input for k, t in lib.tasks.items()}
                result = sel.llm_similarity(llm, index, desc, examples, lib_ex, n)
            else:
                held = pool[: Settings.of(cfg["settings"]).cluster_examples]
                result = sel.cluster(
                    lib,
                    lambda names: _held_out_accuracy(
                        cfg, llm, task_plugin, held, desc, _demos(cfg, version, names)
                    ),
                    n,
                )
        finally:
            llm.close()
            cache.close()
        extra = {"usage": vars(llm.usage), "model": {"name": man["name"], "fingerprint": man["fingerprint"]}}
    result.update(
        strategy=strategy,
        task=task,
        version=version,
        files=[str(p) for p in plan.library_files(cfg, version, result["tasks"])],
    )
    write_json(out, result)
    Provenance(
        "art_select",
        {"task": task, "version": version, "selection": strategy, "n_tasks": n},
        [str(f) for f in plan.sources()],
        inputs=inputs + [str(EVAL_TASKS)],
        extra=extra,
    ).write(out)
    return result


def _held_out_accuracy(cfg: dict, llm, task_plugin, held: list, desc: str, demos: list[str]) -> float:
    from retrace.art.metrics import grade

    ctx = Context(llm, task_plugin, held, [], desc, cfg["settings"], demos=demos, tools=_tools(cfg, llm))
    rows = METHOD_FNS["art"](ctx)
    return sum(grade(task_plugin, p, r["answer"])[0] for p, r in zip(held, rows)) / max(1, len(held))


def run(
    experiment: str,
    job: plan.ArtJob,
    data_path: Path,
    manifest: Path,
    cache_path: Path,
    out: Path,
    selection: Path | None = None,
) -> dict:
    cfg = art_config(experiment)
    task_plugin, problems = _task_data(cfg, job.task, data_path)
    pool, test = task_split(cfg, problems)
    sim = {"problems": str(data_path), "dataset": job.task, "label": job.label}
    llm, cache, man, backend = _llm(cfg, job.model, manifest, cache_path, str(out), sim)
    version = plan.job_version(cfg, job)
    names, files, tools = [], [], {}
    if plan.uses_library(job):
        names = plan.selected_tasks(cfg, job, selection)
        files = plan.library_files(cfg, version, names)
        # ART without tools needs none: it must not depend on the sandbox or the word list
        tools = _tools(cfg, llm) if plan.uses_tools(job) else {}
    ctx = Context(
        llm,
        task_plugin,
        test,
        pool,
        eval_tasks()[job.task]["description"],
        cfg["settings"],
        seed=job.seed,
        demos=_demos(cfg, version, names) if names else [],
        tools=tools,
    )
    try:
        rows = METHOD_FNS[job.method](ctx)
    finally:
        llm.close()
        cache.close()
    for r, p in zip(rows, test):
        r.update(task=job.task, gold=p.gold, label=job.label)
    log.info(
        "%s: %d rows, %d requests (%d cached)", job.path, len(rows), llm.usage.requests, llm.usage.cache_hits
    )
    write_jsonl(out, rows)
    inputs = [str(data_path), str(manifest), str(EVAL_TASKS)] + [str(t) for t in plan.templates(job)]
    if files:
        inputs += [str(selection)] if selection else []
        inputs += [str(f) for f in files] + [str(plan.load_index(plan.version_dirs(cfg, version))[0])]
        # the search collection, the word list, the code template (also rule inputs)
        inputs += [str(p) for p in plan.tool_data(cfg)] if tools else []
    Provenance(
        "art_run",
        plan.config_slice(cfg, job),
        [str(f) for f in plan.sources(job)],
        inputs=list(dict.fromkeys(inputs)),
        extra={
            "job": {"model": job.model, "task": job.task, "label": job.label, "seed": job.seed},
            "library": {
                "version": version,
                "dirs": [str(d) for d in plan.version_dirs(cfg, version)],
                "tasks": names,
                "files": [str(f) for f in files],
            },
            "tools": {k: v.describe() for k, v in tools.items()},
            "engine": backend,
            "device": llm.device,
            "usage": vars(llm.usage),
            "model": {"name": man["name"], "fingerprint": man["fingerprint"]},
            "data": {
                "name": plan.dataset_of(job.task, cfg),
                "fingerprint": data.fingerprint(problems),
                "test_ids": [p.id for p in test],
                "pool_ids": [p.id for p in pool],
                "excluded_ids": sorted(overlap.overlapping(problems, plan.library_inputs(cfg))),
            },
        },
    ).write(out)
    return vars(llm.usage)


def unseen_check(cfg: dict, records: list[dict], problems: dict[str, list]) -> dict:
    """art/unseen.py on the runs' unseen tasks: each one's description and held-out inputs (the
    pool a run drew, as selection sees them) against the main library version."""
    from retrace.art.metrics import format_input

    tasks = {}
    for task in sorted({r["job"]["task"] for r in records if plan.needs_selection(r["job"]["task"])}):
        by_id = {p.id: p for p in problems[task]}
        pool = next((r["data"].get("pool_ids") for r in records if r["job"]["task"] == task), None)
        examples = [by_id[i] for i in pool or [] if i in by_id][:5] or problems[task][:5]
        tasks[task] = (eval_tasks()[task]["description"], [format_input(p) for p in examples])
    if not tasks:
        return {"verdict": "clean", "tasks": {}}
    return unseen.check(load_library(plan.version_dirs(cfg, plan.main_version(cfg))), tasks)


def leakcheck(experiment: str, runs: list[Path], data_dir: Path, out: Path, strict: bool = True) -> dict:
    """Overlaps between the library's demonstration inputs and the items each run used, and
    unseen tasks that near-duplicate a library task (flagged, not a failure)."""
    cfg = art_config(experiment)
    records = overlap.load_runs(runs)
    tasks = sorted({r["job"]["task"] for r in records})
    files = {
        t: Path(data_dir) / f"{compose({'dataset': plan.dataset_of(t, cfg)})['dataset']['name']}.jsonl"
        for t in tasks
    }
    result = overlap.check_runs(
        records, {t: data.read_problems(f) for t, f in files.items()}, plan.library_inputs(cfg)
    )
    result["library_dirs"] = [str(d) for d in plan.all_library_dirs(cfg)]
    result["unseen"] = unseen_check(cfg, records, {t: data.read_problems(f) for t, f in files.items()})
    write_json(out, result)
    Provenance(
        "art_leakcheck",
        {"experiment": experiment, "strict": strict},
        [str(plan.SRC / f) for f in ("art/overlap.py", "art/unseen.py", "art/plan.py", "art/stages.py")],
        inputs=[str(p) for p in runs]
        + [str(f) for f in files.values()]
        + [str(f) for f in plan.leakcheck_inputs(cfg)],
        extra={"verdict": result["verdict"], "unseen": result["unseen"]["verdict"]},
    ).write(out)
    log.info("demonstration leak check: %s (%d findings)", result["verdict"], result["n_findings"])
    for task, lib in unseen.near_duplicates(result["unseen"]).items():
        log.warning("unseen task %s near-duplicates library task %s (art/unseen.py)", task, lib)
    if strict and result["verdict"] != "clean":
        raise SystemExit(
            f"demonstration leak: {result['n_findings']} test/pool items are library inputs -> {out}"
        )
    return result
