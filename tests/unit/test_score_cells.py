"""Scoring one job per model × backend × dataset × seed (retrace.planning.plan.score_groups,
retrace.stages.score_cell) and the planned file lists of claims/report (retrace.planning.plan.planned_files)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from retrace.planning import cells, plan
from retrace.stages import score_cell

M1, M2, D1, D2 = "smollm2-135m-q41", "qwen2.5-coder-0.5b-q4km", "smoke_math", "smoke_mc"
EXP = {
    "runs": [
        {  # two models, refine among the labels
            "models": [M1, M2],
            "backend": "llamacpp",
            "datasets": [D1, D2],
            "methods": ["greedy", "refine"],
            "seeds": [0, 1],
        },
        {  # other labels on M1/D1 for seed 2 only: another label set on the same model and dataset
            "models": [M1],
            "backend": "llamacpp",
            "datasets": [D1],
            "methods": ["greedy", "majority"],
            "seeds": [2],
        },
    ]
}


@pytest.fixture
def planned(monkeypatch):
    monkeypatch.setattr(plan, "load_experiment", lambda name: EXP)
    return plan.jobs({"experiment": "x"})


def _matches(group: plan.ScoreGroup, job: plan.Job) -> bool:
    """Whether the group's rule (its wildcard constraints, as score.smk sets them) makes the job's score."""
    return (
        re.fullmatch(re.escape(group.model), job.model) is not None
        and re.fullmatch(re.escape(group.backend), job.backend) is not None
        and re.fullmatch("|".join(map(re.escape, group.datasets)), job.dataset) is not None
        and re.fullmatch("|".join(map(str, group.seeds)), str(job.seed)) is not None
        and job.label in group.labels
    )


def test_every_score_has_exactly_one_rule_and_each_rule_exactly_its_cells(planned):
    groups = plan.score_groups(planned)
    for job in planned:
        assert sum(_matches(g, job) for g in groups) == 1, job
    for g in groups:  # every cell a rule's wildcards allow holds exactly the rule's labels
        for dataset, seed in itertools.product(g.datasets, g.seeds):
            cell = plan.cell_jobs(planned, g.model, g.backend, dataset, seed)
            assert tuple(j.label for j in cell) == g.labels
            assert g.diagnosed == tuple(j.label for j in cell if j.method == "refine")
    m1 = sorted((g.labels, g.seeds) for g in groups if g.model == M1)
    assert m1 == [(("greedy", "majority"), (2,)), (("greedy", "refine"), (0, 1))]


def test_a_cell_rerun_key_follows_its_jobs_scoring(planned):
    cell = tuple(plan.cell_jobs(planned, M1, "llamacpp", D1, 0))
    other_seed = tuple(plan.cell_jobs(planned, M1, "llamacpp", D1, 1))
    # the score key leaves the seed out (scoring is seedless): cells differing by seed agree
    assert plan.cell_rerun_key(cell) == plan.cell_rerun_key(other_seed)
    rescored = tuple(plan.Job(**{**j.__dict__, "overrides": ("method.scoring.n_boot=10",)}) for j in cell)
    assert plan.cell_rerun_key(rescored) != plan.cell_rerun_key(cell)
    assert plan.cell_rerun_key(cell[:1]) != plan.cell_rerun_key(cell)


def test_score_cell_scores_each_job_and_diagnoses_the_refinements(planned, monkeypatch, tmp_path):
    from retrace.stages import diagnose, score

    calls = []
    monkeypatch.setattr(score, "run", lambda job, gen, data, manifest, out: calls.append(("score", gen, out)))
    monkeypatch.setattr(diagnose, "run", lambda job, gen, data, out: calls.append(("diagnose", gen, out)))
    assert score_cell.run("x", (), (M2, "llamacpp", D2, 1), tmp_path) == 2
    job = f"{M2}/llamacpp/{D2}/{{}}/seed1"
    scored = f"{M2}/llamacpp/{D2}/seed1/{{}}"  # one folder per cell (issue 57)
    assert calls == [
        (
            "score",
            tmp_path / f"generations/{job.format('greedy')}.jsonl",
            tmp_path / f"scores/{scored.format('greedy')}.json",
        ),
        (
            "score",
            tmp_path / f"generations/{job.format('refine')}.jsonl",
            tmp_path / f"scores/{scored.format('refine')}.json",
        ),
        (
            "diagnose",
            tmp_path / f"generations/{job.format('refine')}.jsonl",
            tmp_path / f"diagnostics/{scored.format('refine')}.json",
        ),
    ]
    with pytest.raises(ValueError, match=f"no job on {M2}/llamacpp/{D2}/2"):
        score_cell.run("x", (), (M2, "llamacpp", D2, 2), tmp_path)


def test_claims_and_report_read_the_plans_files_not_a_command_line(planned, monkeypatch):
    from retrace import cli
    from retrace.stages import claims, report

    seen = {}
    monkeypatch.setattr(claims, "run", lambda scores, out, *rest: seen.setdefault("claims", scores))
    monkeypatch.setattr(
        report, "run", lambda scores, out, c, diag, s, p: seen.setdefault("report", (scores, diag))
    )
    cli.main(["claims", "--out", "c.csv", "--experiment", "x", "--results", "res"])
    cli.main(["report", "--out-dir", "r", "--experiment", "x", "--results", "res"])
    assert seen["claims"] == [Path("res/scores") / f"{j.cell}/{j.label}.json" for j in planned]
    assert seen["report"][0] == seen["claims"]
    assert seen["report"][1] == [
        Path("res/diagnostics") / f"{j.cell}/{j.label}.json" for j in planned if j.method == "refine"
    ]
    with pytest.raises(SystemExit):  # files and --experiment: one or the other
        cli.main(["claims", "--out", "c.csv", "--experiment", "x", "res/scores/a.json"])


def test_a_sharded_label_is_merged_by_its_score_job_unless_a_maj_n_prime_label_reads_it():
    """A sharded refinement that Maj@N' is priced from keeps its merge job (rule generate: the
    Maj@N' job reads the merged file before the score job runs); a sharded Maj@N' label, which no
    job reads, is merged by its cell's score job, which declares the merged file."""
    cell = (M1, "llamacpp", D1)
    refine = plan.Job(*cell, "refine", "refine", 0, (), (), 3)
    majority = plan.Job(*cell, "majority", "majority", 0)
    eq = plan.Job(*cell, "majority_eq", "majority", 0, (), ("refine", "majority", "effective"), 2)
    jobs_ = [refine, majority, eq]
    assert plan.merged_in_score(jobs_) == (eq,)
    assert cells.merge_jobs(jobs_) == [refine] and cells.merged_labels(jobs_) == ("refine",)
    assert cells.score_merged(jobs_) == [eq]
    (group,) = plan.score_groups(jobs_)
    assert group.merged == (("majority_eq", 2),)
    # the merges it makes enter its rerun key
    unsharded = [refine, majority, plan.Job(*cell, "majority_eq", "majority", 0, (), eq.equal_compute)]
    assert plan.cell_rerun_key(tuple(jobs_)) != plan.cell_rerun_key(tuple(unsharded))
    assert not plan.merged_in_score(unsharded)
