"""Print the rerun keys of every job of an experiment, one `stage job key` line each: what its
outputs depend on (config slices, code closures, prompt templates, engine versions), as the
workflow's rules compute them. CI hashes this to decide whether the vllm_plumbing workflow has
already passed on these inputs (.ci/run):

    PYTHONPATH=src .venv/bin/python .ci/rerun_keys.py vllm_plumbing | sha256sum
"""

from __future__ import annotations

import sys
from pathlib import Path

from retrace.config.compose import load_experiment
from retrace.planning import cells, plan


def spine(experiment: str) -> list[str]:
    g = {"experiment": experiment}
    jobs = plan.jobs(g)
    out = [
        f"{s} {j.path} {plan.job_rerun_key(s, j)}"
        for j in jobs
        for s in ("probe", "generate", "score", "diagnose")
    ]
    # the generation jobs the workflow runs: each cell's key (its labels' keys and the cell
    # driver's code, retrace.planning.cells.cell_generate_key), which no label's own key covers
    out += [
        f"generate_cell {'/'.join(map(str, c))} {cells.cell_generate_key(labels)}"
        for c, labels in cells.generation_cells(jobs).items()
    ]
    out += [f"model {m} {plan.shared_key('model', m, g)}" for m in sorted({j.model for j in jobs})]
    out += [f"data {d} {plan.shared_key('data', d, g)}" for d in sorted({j.dataset for j in jobs})]
    out += [f"data.source {d} {data_source(d)}" for d in sorted({j.dataset for j in jobs})]
    claims = load_experiment(experiment).get("claims") or {}
    return out + [
        f"claims - {plan.rerun_key('claims', {'claims': claims})}",
        f"report - {plan.rerun_key('report', {})}",
    ]


def data_source(dataset: str) -> str:
    """The data rule's `source` param: the files the dataset reads, by content."""
    from retrace.config.mirror import MirrorMissing, resolve
    from retrace.planning.sources import data_source as source

    try:
        return source(dataset, resolve(None)[0])
    except MirrorMissing as e:
        return f"unreadable ({e})"


def art(block: dict) -> list[str]:
    from retrace.art import plan as art_plan

    cfg = art_plan.check(block)
    library = sorted(p for d in art_plan.all_library_dirs(cfg) for p in Path(d).rglob("*") if p.is_file())
    out = [f"art.split - {art_plan.split_key(cfg)}"]
    return out + [f"art.run {job} {art_plan.run_key(cfg, job, library)}" for job in art_plan.jobs(cfg)]


def drr(block: dict) -> list[str]:
    from retrace.drr import settings

    cfg = settings.load(block)
    return [f"drr.{s} - {settings.stage_key(s, cfg)}" for s in settings.ENTRIES]


def main(experiment: str) -> int:
    exp = load_experiment(experiment)
    lines = spine(experiment)
    lines += art(exp["art"]) if exp.get("art") else []
    lines += drr(exp["drr"]) if exp.get("drr") else []
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
