"""Stage `score`: extract, judge and vote over one job's stored rollouts (no generation).

python -m retrace score <job args> --generations G --data D --manifest M --out S.json
"""

from __future__ import annotations

import json
from pathlib import Path

from retrace.methods.budget import solution_budget
from retrace.planning.plan import Job, config_slice, stage_sources
from retrace.scoring.score import score_generations
from retrace.store import data
from retrace.store.provenance import Provenance, load
from retrace.util.atomic import read_jsonl, write_json
from retrace.util.registry import TASKS


def repeatable(generation_record: dict) -> bool:
    """Whether the generations were made in the engine's deterministic mode, i.e. whether a
    rerun at the same seeds gives the same bytes (retrace.backends.base.is_deterministic)."""
    from retrace.backends.base import is_deterministic

    return is_deterministic((generation_record.get("engine") or {}).get("engine"))


def claims_facts(cfg: dict, generation_record: dict) -> dict:
    """What the claims stage needs to know of this run, from its config and records, not its
    scores: whether its seeds are one draw by design (temperature 0), the engine that really
    generated (the generation's provenance, "simulated" for the simulated engine) and the
    subset of questions it ran on (scoring.run_facts.subset_label)."""
    from retrace.scoring.run_facts import deterministic_by_design, subset_label

    ran = (generation_record.get("engine") or {}).get("name") or cfg["backend"]["name"]
    dataset = cfg["dataset"]
    return {
        "deterministic": deterministic_by_design(cfg),
        "engine": "simulated" if ran == "simulated" else ran,
        "subset": subset_label(dataset.get("limit"), dataset.get("questions")),
    }


def run(job: Job, generations: Path, data_path: Path, manifest_path: Path, out: Path) -> dict:
    cfg = job.config()
    prov = Provenance("score", config_slice("score", cfg), stage_sources("score", cfg))
    prov.inputs = [str(generations), str(data_path), str(manifest_path)]
    problems = {p.id: p for p in data.read_problems(data_path)}
    manifest = json.loads(Path(manifest_path).read_text())
    settings = job.settings()
    scoring = settings.method.scoring
    result = score_generations(
        read_jsonl(generations),
        problems,
        TASKS.get(settings.dataset.task),
        manifest["params"],
        n_boot=scoring.n_boot,
        seed=scoring.seed,
        vote=scoring.vote,
        job=job.path,
    )
    result["job"] = {
        "model": job.model,
        "backend": job.backend,
        "dataset": job.dataset,
        "method": job.label,
        "method_name": job.method,
        "seed": job.seed,
    }
    generated = load(generations)
    result["generation_usage"] = generated.get("usage", {})
    result["bitwise_repeatable"] = repeatable(generated)
    result.update(claims_facts(cfg, generated))
    # N as run (Maj@N' is priced at generation time), budget per solution as configured
    per_problem_n = round(result["n_samples"] / result["n_problems"])
    result["budget"] = solution_budget(cfg["method"], per_problem_n)
    prov.extra["job"] = result["job"]
    write_json(out, result)
    prov.write(out)
    return result
