"""Per-job bounds (retrace.planning.sizing): each method's own calls and caps, Maj@N' from its partner,
probe rates over stated ones, attempts at a partition limit, and `retrace plan --estimate
--json` / `--check` on the paper grid (its problem counts need the benchmark mirror)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrace.config.compose import check_global
from retrace.planning import sizing
from retrace.planning.plan import Job, jobs
from tests import prerequisites

# The paper's question counts and prompt lengths come from the benchmark mirror.
MIRROR = prerequisites.MIRROR or str(Path(__file__).resolve().parent / "no-mirror")
needs_mirror = pytest.mark.skipif(not Path(MIRROR, "math500").is_dir(), reason="[MIRROR] no benchmark mirror")
PAPER_REFINE = (
    "method.sampling.max_tokens=4096",
    "method.n=8",
    "method.depth=4",
    "method.roles.continue.max_tokens=1024",
    "method.roles.critique.max_tokens=1024",
    "method.roles.correct.max_tokens=4096",
)


def method(name: str, *overrides: str) -> dict:
    return Job("qwen2.5-1.5b-instruct", "vllm", "smoke_math", name, name, 0, overrides).config()["method"]


def test_refinement_is_bounded_by_its_role_caps_not_max_tokens_for_every_call():
    b = sizing.refine_bound(method("refine", *PAPER_REFINE), q=500)
    # paper: 8 rollouts x (a 4096 sample + 4 rounds x (continue 1024 + critique 1024 + correct 4096))
    assert b.generated == 8 * (4096 + 4 * (1024 + 1024 + 4096)) == 229_376
    assert b.calls == 8 * (1 + 4 * 3)
    # every call reads the question and the history so far: more than the final history once
    assert b.prompt > 8 * 13 * 500 and b.computed < b.prompt
    affirm = sizing.refine_bound(method("refine", *PAPER_REFINE, "method.critic=affirm"), q=500)
    assert affirm.calls == 8 * (1 + 4 * 2) and affirm.generated == 8 * (4096 + 4 * (1024 + 4096))


def test_best_of_n_with_a_reward_model_makes_no_judge_calls():
    rm = sizing.best_of_n_bound(
        method("best_of_n_prm", "method.n=8", "method.sampling.max_tokens=4096"), q=500
    )
    assert (rm.calls, rm.generated, rm.reward) == (8, 8 * 4096, 8 * (500 + 4096))
    judged = sizing.best_of_n_bound(
        method("best_of_n", "method.n=8", "method.sampling.max_tokens=4096"), q=500
    )
    assert (judged.calls, judged.generated, judged.reward) == (16, 8 * 4096 + 8 * 1, 0)


def test_maj_n_prime_is_bounded_by_its_refinement_partner_plus_one_rollout():
    common = ("qwen2.5-1.5b-instruct", "vllm", "smoke_math")
    refine = Job(*common, "refine", "refine", 0, PAPER_REFINE)
    n8 = ("method.sampling.max_tokens=4096", "method.n=8")
    majority = Job(*common, "majority", "majority", 0, n8)
    eq = Job(*common, "majority_eq", "majority", 0, n8, ("refine", "majority", "effective"))
    e, r, m = sizing.job_bounds([eq, refine, majority], None)  # partners need not come first
    assert e.compute == r.tokens.computed + m.tokens.computed // 8
    assert e.n_prime > 8 and e.tokens.generated == e.compute  # priced as generated tokens
    assert e.equal_compute == [refine.path, "effective"]
    assert sizing.equal_compute_ratios([r, m, e]) == [(eq.path, e.compute / r.tokens.computed)]


def test_each_seed_gets_the_bound_it_would_get_alone_with_its_own_paths():
    """Seeds share one sizing (sizing._seed_free); each job's bound is still its own: the same
    as sizing it on its own with its partners, under its own path and its own partner's."""
    common = ("qwen2.5-1.5b-instruct", "vllm", "smoke_math")
    n8 = ("method.sampling.max_tokens=4096", "method.n=8")

    def cell(seed: int, partnered: bool = True) -> list[Job]:
        eq = Job(*common, "majority_eq", "majority", seed, n8, ("refine", "majority", "nominal"))
        refine = Job(*common, "refine", "refine", seed, PAPER_REFINE)
        return [eq, refine, Job(*common, "majority", "majority", seed, n8)][: 3 if partnered else 1]

    # seed 2 lacks its partners (another run's seeds): priced as Maj@N, not from seed 0's partner
    together = sizing.job_bounds(cell(0) + cell(1) + cell(2, partnered=False), None)
    alone = sizing.job_bounds(cell(0), None) + sizing.job_bounds(cell(1), None)
    alone += sizing.job_bounds(cell(2, partnered=False), None)
    assert [b.as_dict(None) for b in together] == [b.as_dict(None) for b in alone]
    assert [b.path for b in together] == [j.path for j in cell(0) + cell(1) + cell(2, False)]
    assert together[3].equal_compute == [cell(1)[1].path, "nominal"] and together[3].n_prime > 8
    assert together[6].equal_compute == [] and together[6].n_prime is None


def test_a_probe_result_replaces_the_assumed_rates(tmp_path):
    job = Job("qwen2.5-1.5b-instruct", "vllm", "smoke_math", "greedy", "greedy", 0)
    [assumed] = sizing.job_bounds([job], None)
    probe = tmp_path / job.model / f"{job.backend}.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"tok_s": 250.0, "prefill_tok_s": 5000.0}))
    [measured] = sizing.job_bounds([job], None, probe_dir=tmp_path)
    assert (assumed.rates, measured.rates) == ("assumed", "measured by probe")
    assert measured.work_s > assumed.work_s  # 250 tok/s measured, 2,500 stated


def test_attempts_pay_the_engine_load_again():
    b = sizing.JobBound("j", "generate", 1, sizing.Bound(), work_s=100 * 3600 / sizing.SAFETY)
    assert b.minutes() == 6000 + sizing.RUNTIME_OVERHEAD_MIN
    assert b.attempts(None) == 1 and b.attempts(10**5) == 1
    assert b.attempts(1440) == -(-6000 // (1440 - sizing.RUNTIME_OVERHEAD_MIN)) == 5


@needs_mirror
def test_paper_estimate_prints_the_equal_compute_bounds_and_writes_per_job_json(
    tmp_path, capsys, monkeypatch
):
    from retrace.cli import main

    monkeypatch.setenv("RETRACE_MIRROR", MIRROR)
    out = tmp_path / "bounds.json"
    assert main(["plan", "--experiment", "paper", "--estimate", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("equal-compute bounds, baseline/refine"))
    low, high = (float(v) for v in line.split("min ")[1].split(" (")[0].split(", max "))
    assert 0.8 <= low <= high <= 1.25 and "(120 pairs)" in line
    assert "rates assumed" in text and "engine loads" in text
    found = json.loads(out.read_text())
    assert (found["max_runtime"], found["attempts_allowed"]) == (1440, 4)  # config, profiles/slurm
    labels, rows = found["labels"], found["jobs"]
    assert len(labels) == 675 and {"generated_tokens", "gpu_seconds", "attempts"} <= set(labels[0])
    refine = next(r for r in labels if r["job"].endswith("/math500/refine/seed0"))
    assert refine["generated_tokens"] == 500 * 229_376  # MATH-500's questions x the role caps
    # the jobs the workflow runs: cell parts, each bounded by its labels' sum, and shard jobs
    parts = [r for r in rows if r["rule"] == "generate_cell"]
    assert sum(len(r["labels"]) for r in parts) == 630 and len(rows) == len(parts) + 45
    by_path = {r["job"]: r for r in labels}
    for r in parts:
        cell = r["job"].split(".part")[0].rsplit("/", 1)
        mine = [by_path[f"{cell[0]}/{label}/{cell[1]}"] for label in r["labels"]]
        assert r["generated_tokens"] == sum(x["generated_tokens"] for x in mine)
        assert r["runtime_min"] - 30 == sum(x["runtime_min"] - 30 for x in mine) and r["attempts"] <= 3
    loads = next(x for x in text.splitlines() if x.startswith("engine loads: "))
    total = sum(r["attempts"] * r["engines"] for r in parts) + sum(
        r["attempts"] * r["shards"] for r in rows if r["rule"] == "generate_shard"
    )
    assert loads.startswith(f"engine loads: {total:,} as sized") and "least possible at this limit: " in loads


@needs_mirror
def test_plan_check_fails_every_job_needing_more_attempts_than_the_retries(tmp_path, capsys, monkeypatch):
    import copy

    from retrace.cli import main
    from retrace.planning import plan

    monkeypatch.setenv("RETRACE_MIRROR", MIRROR)
    shipped = plan.load_experiment("paper")
    unsharded = copy.deepcopy(shipped)  # the grid without its per-label shards
    for run in unsharded["runs"]:
        for m in run["methods"]:
            if isinstance(m, dict):
                m.pop("shards", None)
    monkeypatch.setattr(plan, "load_experiment", lambda name: unsharded if name == "paper" else shipped)
    cfg = check_global({"experiment": "paper", "mirror": MIRROR})
    bounds = sizing.job_bounds(jobs(cfg), MIRROR)
    retries = 3  # profiles/slurm: 4 attempts, one kept for faults, so 3 a cell part
    expected = {b.path for b in bounds if b.attempts(1440) > retries}
    assert expected, "unsharded, the paper grid has labels beyond 3 attempts of 24 h"
    assert main(["plan", "--experiment", "paper", "--check"]) == 1
    failing = [x for x in capsys.readouterr().out.splitlines() if x.startswith("check: FAIL generate")]
    # one line each, naming the label alone in its part: "M/B/D/seedS.partK (label): ..."
    named = set()
    for line in failing:
        cell, label = line.split()[3].split(".part")[0], line.split(" (", 1)[1].split(")", 1)[0]
        named.add(f"{cell.rsplit('/', 1)[0]}/{label}/{cell.rsplit('/', 1)[1]}")
    assert named == expected and len(failing) == len(expected)


def test_shards_split_a_jobs_runtime_and_pay_a_load_each():
    work = 100 * 3600 / sizing.SAFETY  # 6,000 min of engine time at the safety factor
    one = sizing.JobBound("j", "generate", 1, sizing.Bound(), work_s=work)
    ten = sizing.JobBound("j", "generate_shard", 1, sizing.Bound(), work_s=work, shards=10)
    assert ten.minutes() == 600 + sizing.RUNTIME_OVERHEAD_MIN and ten.attempts(1440) == 1
    assert one.attempts(1440) == 5
    assert ten.wall_seconds(1440) == work + 10 * ten.load_s  # ten engine loads, one attempt each
    assert one.wall_seconds(1440) == work + 5 * one.load_s


@needs_mirror
def test_the_shipped_paper_grid_fits_its_time_limit_and_retries(capsys, monkeypatch):
    from retrace.cli import main

    monkeypatch.setenv("RETRACE_MIRROR", MIRROR)
    assert main(["plan", "--experiment", "paper", "--check"]) == 0
    assert "check: paper: 675 jobs, 0 problems" in capsys.readouterr().out
