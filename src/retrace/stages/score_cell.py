"""Stage `score-cell`: score every job of one model × backend × dataset × seed in one process,
and diagnose its refinement jobs (no generation).

    python -m retrace score-cell --experiment paper --model M --backend B --dataset D --seed S \
        [--override O ...] [--results results]

The jobs are the experiment's (retrace.planning.plan.jobs, with the global overrides), so the files this
writes are exactly what the rule's output folders hold (workflow/rules/score.smk): for each job
`results/scores/<model>/<backend>/<dataset>/seed<S>/<label>.json` (retrace.stages.score) and, for
refinement jobs, the same under `results/diagnostics/` (retrace.stages.diagnose), each with its
own provenance record, as when they were jobs of their own. A sharded job's generations are first
merged from its shard files (`results/generations/<job>.jsonl` and its record, as `merge-shards`
writes them; retrace.planning.plan.merged_in_score says which). Why one job per cell: scoring takes
seconds, and at paper scale one Snakemake job per label was most of the jobs the workflow plans;
why one folder per cell: every file a rule declares costs the planner (issue 57).
"""

from __future__ import annotations

from pathlib import Path

from retrace.planning.plan import cell_jobs, diagnosed, jobs, merged_in_score


def run(experiment: str, overrides: tuple[str, ...], cell: tuple[str, str, str, int], results: Path) -> int:
    """Score (and diagnose) the cell's jobs; returns how many jobs it scored."""
    from retrace.stages import diagnose, generate, score

    todo = cell_jobs(jobs({"experiment": experiment, "overrides": list(overrides)}), *cell)
    if not todo:
        raise ValueError(f"experiment {experiment!r} has no job on {'/'.join(map(str, cell))}")
    merged = merged_in_score(todo)
    for job in todo:
        generations = results / "generations" / f"{job.path}.jsonl"
        problems = results / "data" / f"{job.dataset}.jsonl"
        manifest = results / "models" / job.model / "manifest.json"
        if job in merged:  # its shards, joined as `merge-shards` joins them (its own record too)
            shard_files = [
                results / "shards" / job.path / f"{i}of{job.shards}.jsonl" for i in range(job.shards)
            ]
            generate.merge(job, problems, shard_files, generations)
        score.run(job, generations, problems, manifest, results / "scores" / f"{job.scored}.json")
        if diagnosed(job):
            diagnose.run(job, generations, problems, results / "diagnostics" / f"{job.scored}.json")
    return len(todo)
