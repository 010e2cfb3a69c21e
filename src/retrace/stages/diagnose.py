"""Stage `diagnose`: per-depth diagnostics of one refinement job (no generation).

    python -m retrace diagnose <job args> --generations G --data D --out results/diagnostics/<job>.json

Vote-level recovery/regression, per-rollout net correction benefit B(d), answer diversity
and accuracy by depth (retrace.scoring.refine_diagnostics).
"""

from __future__ import annotations

from pathlib import Path

from retrace.planning.plan import Job, config_slice, stage_sources
from retrace.scoring.refine_diagnostics import diagnose
from retrace.store import data
from retrace.store.provenance import Provenance
from retrace.util.atomic import read_jsonl, write_json
from retrace.util.registry import TASKS


def run(job: Job, generations: Path, data_path: Path, out: Path) -> dict:
    cfg = job.config()
    prov = Provenance(
        "diagnose",
        config_slice("score", cfg),
        stage_sources("diagnose", cfg),
        inputs=[str(generations), str(data_path)],
    )
    problems = {p.id: p for p in data.read_problems(data_path)}
    result = diagnose(read_jsonl(generations), problems, TASKS.get(job.settings().dataset.task))
    result["job"] = {
        "model": job.model,
        "backend": job.backend,
        "dataset": job.dataset,
        "method": job.label,
        "method_name": job.method,
        "seed": job.seed,
    }
    write_json(out, result)
    prov.write(out)
    return result
