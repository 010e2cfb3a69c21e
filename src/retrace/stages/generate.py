"""Stage `generate`: run one method for one job (model × backend × dataset × method × seed).

    python -m retrace generate --model M --backend B --dataset D --method X --label L --seed S \
        --data results/data/D.jsonl --manifest results/models/M/manifest.json \
        --cache results/cache/requests --out results/generations/.../seedS.jsonl

The engine is loaded at most once, and only if some request is not in the request cache.
With `--shard I --shards K` the job runs only the problems of data-parallel shard I (see
retrace.store.shards); `merge()` (`python -m retrace merge-shards`) joins the K shard outputs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from retrace.config.settings import backend_settings, dataset_settings, method_settings
from retrace.engine.llm import CachedLLM
from retrace.methods.base import MethodContext
from retrace.planning.cells import scorer_model
from retrace.planning.plan import Job, config_slice, stage_sources, templates
from retrace.store import data, models, shards
from retrace.store.cache import RequestCache
from retrace.store.provenance import Provenance
from retrace.util.atomic import read_jsonl, write_jsonl
from retrace.util.frozen import thaw
from retrace.util.registry import BACKENDS, METHODS, TASKS

log = logging.getLogger(__name__)


def flops(params: int, usage) -> dict:
    """FLOPs ≈ 2 × params per token (Kaplan et al. 2020, arXiv:2001.08361, forward pass)."""
    prompt, cached, gen = usage.prompt_tokens_all, usage.cached_prompt_tokens_all, usage.generated_tokens_all
    return {
        "params": params,
        "nominal": 2 * params * (prompt + gen),
        "effective": 2 * params * (prompt - cached + gen),
        "prompt": 2 * params * prompt,
        "cached_prompt": 2 * params * cached,
        "generated": 2 * params * gen,
    }


def equal_compute(job: Job, sources: tuple[Path, Path], manifest: dict) -> tuple[Job, dict]:
    """Job with method.n = N', priced from the measured tokens of (refinement, Maj@N) runs."""
    from dataclasses import replace

    from retrace.scoring.compute import equal_compute_n, min_sample_tokens, structural_usage
    from retrace.store.provenance import load

    refine, majority = load(sources[0]), load(sources[1])
    # effective: priced from the request structure (shared prefixes), the same on any engine;
    # the engine's own cache report only where the structure is not recorded
    shapes = [structural_usage(read_jsonl(p)) for p in sources]
    usages = [s for s in shapes if s is not None]
    if len(usages) < len(shapes):
        usages = [refine["usage"], majority["usage"]]
    info = equal_compute_n(
        usages[0],
        usages[1],
        int(majority["config"]["method"]["n"]),
        manifest["params"],
        kind=job.equal_compute[2],
        samples=int(majority["usage"].get("requests", 0)),
        min_generated=min_sample_tokens(majority["config"]["method"]),
    )
    info["effective_basis"] = "request structure" if None not in shapes else "engine cache"
    log.info(
        "equal compute: N'=%d (%s FLOPs, refinement/Maj@N = %.2f)",
        info["n_prime"],
        info["kind"],
        info["ratio"],
    )
    return replace(job, overrides=job.overrides + (f"method.n={info['n_prime']}",)), info


def engine(manifest: dict, cfg: dict, cache: RequestCache) -> CachedLLM:
    """A lazily loaded, cached engine for `manifest` on the job's backend and engine settings
    (checked once against what the backend states: retrace.config.settings.backend_settings)."""
    name = cfg["backend"]["name"]
    backend_cls = BACKENDS.get(name)
    checked = backend_settings(cfg["backend"], backend_cls.engine_keys(), f"config/backend/{name}.yaml")
    settings = thaw(checked.engine)  # the engine's own copy: a backend may add to it
    return CachedLLM(
        lambda: backend_cls(manifest, settings),
        cfg["backend"]["name"],
        manifest,
        cache,
        identity=backend_cls.identity(manifest, settings),
        max_in_flight=settings.get("max_in_flight"),
    )


def judge_engine(cfg: dict, scorer_manifest: Path | None, cache: RequestCache) -> CachedLLM | None:
    wanted = scorer_model(cfg)
    if wanted is None:
        return None
    if scorer_manifest is None:
        raise ValueError(
            f"method {cfg['method']['name']!r}: scorer.model={wanted!r} needs that model's "
            "manifest (--scorer-manifest)"
        )
    judge = models.load_manifest(scorer_manifest)
    if judge["name"] != wanted:
        raise ValueError(f"{scorer_manifest}: manifest of {judge['name']!r}, but scorer.model={wanted!r}")
    return engine(judge, cfg, cache)


def run(
    job: Job,
    data_path: Path,
    manifest_path: Path,
    cache_path: Path,
    out: Path,
    equal_compute_from: tuple[Path, Path] | None = None,
    scorer_manifest: Path | None = None,
    shard: tuple[int, int] | None = None,
) -> dict:
    """Run the job's method; `scorer_manifest` = the judge model's manifest when the method's
    scorer names a model other than the job's (its engine is passed as ctx.scorer_llm);
    `shard` = (I, K): only the problems of data-parallel shard I of K (retrace.store.shards)."""
    manifest = models.load_manifest(manifest_path)
    job, priced = price(job, equal_compute_from, manifest)
    cfg = label_config(job, data_path)
    cache = RequestCache(cache_path, job=str(out))
    llm = engine(manifest, cfg, cache)
    judge = judge_engine(cfg, scorer_manifest, cache)
    inputs = Inputs(data_path, manifest_path, equal_compute_from, scorer_manifest)
    try:
        return execute(job, cfg, inputs, (llm, judge), out, shard, priced)
    finally:
        for e in (llm, judge):
            if e is not None:
                e.close()
        cache.close()


def price(job: Job, equal_compute_from: tuple[Path, Path] | None, manifest: dict) -> tuple[Job, dict]:
    """The job with N' set when it is an equal-compute label (and how it was priced), else as is."""
    if not equal_compute_from:
        return job, {}
    return equal_compute(job, equal_compute_from, manifest)


def label_config(job: Job, data_path: Path) -> dict:
    """The job's resolved config, with what its engine is told about the job."""
    cfg = job.config()
    if cfg["backend"]["name"] == "simulated":  # answers from the job's problems (backends/simulated.py)
        cfg["backend"]["engine"].update(problems=str(data_path), dataset=job.dataset, label=job.label)
    if cfg["backend"]["name"] == "served":  # one server for every label of a cell (its prefix cache)
        cfg["backend"]["engine"]["route"] = f"{job.model}/{job.dataset}/{job.seed}"
    return cfg


@dataclass(frozen=True)
class Inputs:
    """The files a generation job reads (its provenance inputs)."""

    data: Path
    manifest: Path
    equal_compute_from: tuple[Path, Path] | None = None
    scorer_manifest: Path | None = None


def execute(
    job: Job,
    cfg: dict,
    inputs: Inputs,
    engines: tuple[CachedLLM, CachedLLM | None],
    out: Path,
    shard: tuple[int, int] | None = None,
    priced: dict | None = None,
) -> dict:
    """Run one label's method on `engines` (policy, judge or None) and write its generations
    and provenance to `out`; the usage recorded is what the engines' `usage` counted."""
    llm, judge = engines
    manifest = llm.model
    prov = Provenance("generate", config_slice("generate", cfg), stage_sources("generate", cfg))
    prov.inputs = (
        [str(inputs.data), str(inputs.manifest)]
        + [str(t) for t in templates(cfg)]
        + [str(p) for p in inputs.equal_compute_from or ()]
        + ([str(inputs.scorer_manifest)] if inputs.scorer_manifest else [])
    )
    problems = data.read_problems(inputs.data)
    if shard:
        problems = shards.select(problems, *shard)
        prov.extra["shard"] = {"index": shard[0], "of": shard[1]}
    dataset = dataset_settings(cfg["dataset"], f"config/dataset/{job.dataset}.yaml")
    task = TASKS.get(dataset.task)
    ctx = MethodContext(
        seed=job.seed, task=task, scorer_llm=judge, template=dataset.template or task.default_template
    )
    settings = method_settings(cfg["method"], f"config/method/{job.method}.yaml")
    rows = METHODS.get(settings.name)(problems, settings, llm, ctx)
    u = llm.usage
    log.info(
        "%s: %d requests, %d from the request cache, %d engine loads",
        job.path,
        u.requests,
        u.cache_hits,
        u.engine_loads,
    )
    prov.extra.update(
        {
            "job": {**job.selections(), "label": job.label, "seed": job.seed},
            "engine": cfg["backend"],
            "device": llm.device,
            "seeds": {"run": job.seed},
            "model": {"name": manifest["name"], "fingerprint": manifest["fingerprint"]},
            "data": {"name": job.dataset, "fingerprint": data.fingerprint(problems)},
            "usage": vars(u),
            "flops": flops(manifest["params"], u),
        }
    )
    if llm.server:  # service mode: which server ran the requests, its settings and versions
        prov.extra["server"] = llm.server
    if priced:
        prov.extra["equal_compute"] = priced
    if judge is not None:  # its FLOPs are priced per row by scoring (scorer identity has params)
        prov.extra["scorer_usage"] = {"model": judge.model["name"], **vars(judge.usage)}
    write_jsonl(out, rows)
    prov.write(out)
    return vars(u)


def merge(job: Job, data_path: Path, shard_paths: list[Path], out: Path) -> None:
    """Join the outputs of a job's data-parallel shards (in shard order) into its generations
    file, in the order of the problems file; usage and FLOPs are the shards' sums."""
    cfg = job.config()
    prov = Provenance(
        "generate", config_slice("generate", cfg), stage_sources("generate", cfg) + [Path(shards.__file__)]
    )
    prov.inputs = [str(data_path)] + [str(p) for p in shard_paths]
    problems = data.read_problems(data_path)
    loaded = {str(p): shards.load_shard(p) for p in shard_paths}
    rows = shards.merge_rows(problems, {p: r for p, (r, _) in loaded.items()})
    records = [rec for _, rec in loaded.values()]
    first = records[0]
    prov.extra.update(
        {
            "job": first["job"],
            "engine": first["engine"],
            "seeds": first["seeds"],
            "model": first["model"],
            "data": {"name": job.dataset, "fingerprint": data.fingerprint(problems)},
            "device": sorted({r["device"] for r in records}),
            "usage": shards.sum_usage([r["usage"] for r in records]),
            "flops": {**shards.sum_usage([r["flops"] for r in records]), "params": first["flops"]["params"]},
            "shards": [{"path": p, "executor": rec["host"]["executor"]} for p, (_, rec) in loaded.items()],
        }
    )
    if "equal_compute" in first:
        prov.extra["equal_compute"] = first["equal_compute"]
    if "scorer_usage" in first:  # an LLM judge on another model: its usage adds up the same way
        prov.extra["scorer_usage"] = {
            "model": first["scorer_usage"]["model"],
            **shards.sum_usage([r["scorer_usage"] for r in records]),
        }
    write_jsonl(out, rows)
    prov.write(out)
