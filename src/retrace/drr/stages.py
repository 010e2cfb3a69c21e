"""DRR stage bodies (called by `retrace drr <sub>`; see cli.py for the command lines).

questions -> distil (Algorithm 1) -> split (DM rows, grouped 80/20) -> train (one DM per
variant) ; generate (rejection paths + Abstain + Self-Critic on the eval questions) ->
infer (episodes per method) ; leakcheck ; summarise (report.py).
Every artifact gets a provenance record whose inputs chain back to the data and model.
"""

from __future__ import annotations

import importlib
import logging
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from retrace.drr import dm_data as dmdata
from retrace.drr import loop, prompts, reasoner, settings
from retrace.store import data, models
from retrace.util.atomic import read_jsonl, write_json, write_jsonl
from retrace.util.hashing import sha256_file
from retrace.util.records import Problem

log = logging.getLogger(__name__)


def _templates(stage: str) -> list[str]:
    from retrace.util.templates import PROMPTS_DIR

    return [str(PROMPTS_DIR / "drr" / t) for t in settings.TEMPLATES.get(stage, ())]


# ---------------------------------------------------------------- questions
def split_questions(problems: list[Problem], fraction: float, seed: int, name: str):
    """(train, eval): a seeded shuffle of the question ids, the first round(fraction·n) to
    train; one question (one id) is never on both sides. Order of `problems` is kept."""
    ids = sorted(p.id for p in problems)
    random.Random(f"{seed}:drr-questions:{name}").shuffle(ids)
    train_ids = set(ids[: round(fraction * len(ids))])
    return [p for p in problems if p.id in train_ids], [p for p in problems if p.id not in train_ids]


def questions(
    cfg: Mapping, name: str, data_path: Path, train_path: Path | None, out_train: Path, out_eval: Path
) -> dict:
    problems = data.read_problems(data_path)
    if train_path:
        train, evals = data.read_problems(train_path), problems
        note = f"{name}: DRR-train questions from {Path(train_path).name}, evaluation on all of {name}"
        overlap = {p.id for p in train} & {p.id for p in evals}
        if overlap:
            raise ValueError(f"{train_path} and {data_path} share question ids {sorted(overlap)[:5]}")
    else:
        train, evals = split_questions(problems, float(cfg["train_fraction"]), int(cfg["split_seed"]), name)
        note = (
            f"{name}: no training split used; its {len(problems)} questions were split by id "
            f"{len(train)}/{len(evals)} into DRR-train / evaluation (seed {cfg['split_seed']})"
        )
    inputs = [data_path] + ([train_path] if train_path else [])
    info = {"note": note, "n_train": len(train), "n_eval": len(evals)}
    for rows, out in ((train, out_train), (evals, out_eval)):
        data.write_problems(out, rows)
        settings.provenance("questions", cfg, inputs, split=info, dataset=name).write(out)
    return info


# ---------------------------------------------------------------- LLM handle
def make_llm(
    manifest_path: Path,
    backend: str,
    cache_path: Path,
    job: str,
    problems: Path | None = None,
    dataset: str = "",
):
    """(CachedLLM, cache, manifest, backend config) of a reasoner job; the simulated engine
    (retrace rehearse) answers from the job's questions (`problems`, `dataset`)."""
    from retrace.config.compose import compose
    from retrace.engine.llm import CachedLLM
    from retrace.store.cache import RequestCache
    from retrace.util.registry import BACKENDS

    manifest = models.load_manifest(manifest_path)
    backend_cfg = compose({"backend": backend})["backend"]
    engine = backend_cfg.get("engine", {})
    if backend == "simulated":
        engine = backend_cfg["engine"] = {
            **engine,
            "problems": str(problems),
            "dataset": dataset,
            "label": settings.SIMULATED_REASONER_LABEL,
        }
    backend_cls = BACKENDS.get(backend)
    cache = RequestCache(cache_path, job=job)
    llm = CachedLLM(
        lambda: backend_cls(manifest, engine),
        backend,
        manifest,
        cache,
        identity=backend_cls.identity(manifest, engine),
    )
    return llm, cache, manifest, backend_cfg


def _close(llm, cache, backend_cfg: Mapping) -> dict:
    """What the job's records say of its engine run: usage, device and the backend's settings
    (`engine`, as the spine's records hold it: the run summary groups and rates stages by it)."""
    llm.close()
    cache.close()
    return {"usage": vars(llm.usage), "device": llm.device, "engine": dict(backend_cfg)}


def prompt_records(problem_id: str, turns: list[dict]) -> list[dict]:
    """One stored prompt per reasoner turn, with the past attempts it echoes (for the leak scan)."""
    return [
        {
            "problem_id": problem_id,
            "turn": t["turn"],
            "messages": t["messages"],
            "context": [{"answer": c["answer"], "rationale": c["rationale"]} for c in turns[:i]],
        }
        for i, t in enumerate(turns)
    ]


# ---------------------------------------------------------------- distil
def distil(
    cfg: Mapping,
    name: str,
    problems_path: Path,
    manifest_path: Path,
    backend: str,
    seed: int,
    cache_path: Path,
    out_traces: Path,
    out_prompts: Path,
) -> dict:
    """Algorithm 1 on the DRR-train questions: traces (DM behaviour data) and every prompt."""
    problems = data.read_problems(problems_path)
    gold = {p.id: p.gold for p in problems}
    llm, cache, manifest, backend_cfg = make_llm(
        manifest_path, backend, cache_path, str(out_traces), problems_path, name
    )
    try:  # the gold is consulted only here, after the reply, to stop and to label
        paths = reasoner.rejection_paths(
            problems,
            llm,
            cfg,
            seed,
            int(cfg["max_turns_distil"]),
            stop=lambda p, t: t["letter"] == gold[p.id],
        )
    finally:
        run = _close(llm, cache, backend_cfg)
    traces: list[dict] = []
    records: list[dict] = []
    for p in problems:
        turns = paths[p.id]["turns"]
        stored = iter(turns)
        attempts = loop.distil(
            p.id,
            lambda q, c: _next_reply(stored),
            _is_gold(p),
            int(cfg["max_turns_distil"]),
        )
        assert len(attempts) == len(turns), "rejection path and Algorithm 1 disagree"
        traces.append(
            {
                "id": p.id,
                "dataset": name,
                "question": prompts.question_text(p),
                "attempts": [a.to_dict() for a in attempts],
            }
        )
        records += prompt_records(p.id, turns)
    n_acc = sum(t["attempts"][-1]["verdict"] == "accept" for t in traces)
    stats = {
        "questions": len(traces),
        "accepted": n_acc,
        "turns": sum(len(t["attempts"]) for t in traces),
        "first_turn_correct": sum(t["attempts"][0]["verdict"] == "accept" for t in traces),
    }
    inputs = [problems_path, manifest_path] + _templates("distil")
    extra = {
        "seeds": {"run": seed},
        "model": {"name": manifest["name"], "fingerprint": manifest["fingerprint"]},
        "distil": stats,
        **run,
    }
    write_jsonl(out_prompts, records)
    settings.provenance("distil", cfg, inputs, **extra).write(out_prompts)
    write_jsonl(out_traces, traces)
    settings.provenance("distil", cfg, inputs, **extra).write(out_traces)
    return stats


def _is_gold(p: Problem) -> Callable[[str], bool]:
    """Whether a reply's answer letter is `p`'s gold (Algorithm 1's A' = A)."""
    return lambda a: prompts.answer_letter(a, p.choices or ()) == p.gold


def _next_reply(stored: Iterator[dict]) -> tuple[str, str]:
    t = next(stored)
    return t["answer"], t["rationale"]


# ---------------------------------------------------------------- split
def split(cfg: Mapping, traces_paths: list[Path], seed: int, out_dir: Path) -> dict:
    """DM rows: Rejects downsampled, grouped 80/20 split, and the shuffled-label train set."""
    traces = [t for p in traces_paths for t in read_jsonl(p)]
    dev_fraction = float(cfg["dm"]["dev_fraction"])
    real = dmdata.build_dataset(traces, seed, dev_fraction)
    shuffled = dmdata.shuffle_labels(real["train"], seed)
    out_dir = Path(out_dir)
    files = {"train": real["train"], "dev": real["dev"], "train_shuffled": shuffled}
    for part, rows in files.items():
        write_jsonl(out_dir / f"{part}.jsonl", rows)
        settings.provenance(
            "split", cfg, traces_paths, counts=real["counts"], settings=real["settings"], part=part
        ).write(out_dir / f"{part}.jsonl")
    summary = {
        "counts": real["counts"],
        "settings": real["settings"],
        "dev_ids_in_train": sorted({r["id"] for r in real["dev"]} & {r["id"] for r in real["train"]}),
    }
    write_json(out_dir / "split.json", summary)
    settings.provenance("split", cfg, traces_paths).write(out_dir / "split.json")
    return summary


# ---------------------------------------------------------------- train
def train(
    cfg: Mapping,
    variant: str,
    split_dir: Path,
    seed: int,
    out_manifest: Path,
    ckpt_dir: Path,
    out_metrics: Path,
) -> dict:
    """One DM: weighted (the paper's), unweighted CE, or trained on shuffled labels; a
    simulated backbone (retrace rehearse) trains nothing (drr/simulated_dm.py)."""
    if settings.simulated_dm(cfg):
        sim = importlib.import_module(settings.SIMULATED_DM)
        return sim.train(cfg, variant, split_dir, seed, out_manifest, ckpt_dir, out_metrics)
    import torch

    from retrace.drr import dm

    torch.set_num_threads(int(cfg["dm"]["threads"]))
    split_dir = Path(split_dir)
    train_file = split_dir / ("train_shuffled.jsonl" if variant == "shuffled" else "train.jsonl")
    dev_file = split_dir / "dev.jsonl"
    weights = dmdata.class_weights(variant != "unweighted", float(cfg["dm"]["accept_weight_ratio"]))
    spec = cfg["backbones"][cfg["backbone"]]
    tok, model = dm.load_backbone(spec)
    start = dm.backbone_files(spec)  # the starting weights are an input of the DM, like its data
    hist = dm.train(
        model, tok, read_jsonl(train_file), read_jsonl(dev_file), weights, cfg["dm"], seed, cfg["strategy"]
    )
    files = dm.save(model, tok, ckpt_dir)
    companions = [{"path": str(f), "sha256": sha256_file(f)} for f in files]
    write_json(
        out_manifest,
        {
            "variant": variant,
            "backbone": cfg["backbone"],
            "spec": spec,
            "weights": {str(k): v for k, v in weights.items()},
            "folder": str(ckpt_dir),
            "files": companions,
        },
    )
    inputs = [train_file, dev_file] + _templates("train") + start
    cut = {k: v for k, v in hist.get("truncation", {}).items() if k != "per_row"}
    settings.provenance(
        "train",
        cfg,
        inputs,
        companions=companions,
        variant=variant,
        seeds={"run": seed},
        device=hist["device"],
        truncation=cut,
        backbone={"name": cfg["backbone"], **spec, "files": len(start)},
    ).write(out_manifest)
    metrics = {
        "variant": variant,
        "weights": {str(k): v for k, v in weights.items()},
        "n_train": len(read_jsonl(train_file)),
        "n_dev": len(read_jsonl(dev_file)),
        **hist,
        "dev": hist["epochs"][-1] if hist["epochs"] else {},
    }
    write_json(out_metrics, metrics)
    settings.provenance(
        "train", cfg, [out_manifest, train_file, dev_file], variant=variant, truncation=cut
    ).write(out_metrics)
    return metrics


# ---------------------------------------------------------------- generate (eval)
def _dataset_of(problems_path: Path) -> str:
    """The dataset an evaluation questions file belongs to, as its provenance (`drr questions`) names it."""
    from retrace.store.provenance import load

    return str(load(problems_path).get("dataset", ""))


def generate(
    cfg: Mapping,
    problems_path: Path,
    manifest_path: Path,
    backend: str,
    seed: int,
    cache_path: Path,
    out_rows: Path,
    out_prompts: Path,
) -> dict:
    """Rejection paths of max_turns_infer turns, and the Abstain and Self-Critic baselines."""
    problems = data.read_problems(problems_path)
    dataset = _dataset_of(problems_path) if backend == "simulated" else ""
    llm, cache, manifest, backend_cfg = make_llm(
        manifest_path, backend, cache_path, str(out_rows), problems_path, dataset
    )
    try:
        paths, abstain, critic = reasoner.eval_generations(
            problems, llm, cfg, seed, int(cfg["max_turns_infer"])
        )
    finally:
        run = _close(llm, cache, backend_cfg)
    rows, records = [], []
    for p in problems:
        rows.append(
            {
                "problem_id": p.id,
                "path": paths[p.id]["turns"],
                "abstain": abstain[p.id],
                "selfcritic": critic[p.id],
            }
        )
        records += prompt_records(p.id, paths[p.id]["turns"])
        records.append({"problem_id": p.id, "turn": "abstain", "messages": abstain[p.id]["messages"]})
        records += [
            {"problem_id": p.id, "turn": f"selfcritic{s['step']}", "messages": s["messages"]}
            for s in critic[p.id]["steps"]
        ]
    inputs = [problems_path, manifest_path] + _templates("generate")
    extra = {
        "seeds": {"run": seed},
        "model": {"name": manifest["name"], "fingerprint": manifest["fingerprint"]},
        **run,
    }
    write_jsonl(out_prompts, records)
    settings.provenance("generate", cfg, inputs, **extra).write(out_prompts)
    write_jsonl(out_rows, rows)
    settings.provenance("generate", cfg, inputs, **extra).write(out_rows)
    return run["usage"]
