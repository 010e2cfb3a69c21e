"""`make controls` pieces (issue 31): the ASDiv task, the control claim rows, CPU time estimates."""

from __future__ import annotations

import csv
import json

import pytest

from retrace.config import check_global
from retrace.estimate import DEFAULT_CPU_TOK_S, estimate
from retrace.plan import jobs
from retrace.registry import TASKS
from retrace.stages import claims
from tests.unit.test_claims_stage import write_score


def asdiv_cfg(limit=None):
    return {
        "name": "asdiv",
        "task": "asdiv",
        "source": "mirror",
        "mirror_path": "asdiv/test.jsonl",
        "limit": limit,
    }


def write_asdiv(tmp_path, rows):
    path = tmp_path / "asdiv/test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def row(idx, answer, body="Ann has 7 apples and 2 pears.", question="How many fruits?"):
    return {"body": body, "question": question, "answer": answer, "idx": idx, "solution_type": "Addition"}


def test_asdiv_joins_body_and_question_and_drops_the_unit(tmp_path):
    write_asdiv(tmp_path, [row(0, "9 (fruits)"), row(1, "1,200 (m)"), row(2, "0.5 (kg)")])
    problems, _ = TASKS.get("asdiv").load(asdiv_cfg(), tmp_path)
    assert [p.gold for p in problems] == ["9", "1200", "0.5"]
    assert problems[0].question == "Ann has 7 apples and 2 pears. How many fruits?"
    assert problems[0].id == "asdiv/0"
    task = TASKS.get("asdiv")
    assert task.is_correct(task.extract_answer("7 + 2 = 9, so \\boxed{9}.", problems[0]), problems[0])


def test_asdiv_skips_non_numeric_golds_and_keeps_file_ids(tmp_path):
    write_asdiv(tmp_path, [row(0, "Yes"), row(1, "3:30 p.m."), row(2, "4 (dogs)"), row(3, "Bryan")])
    problems, _ = TASKS.get("asdiv").load(asdiv_cfg(), tmp_path)
    assert [(p.id, p.gold) for p in problems] == [("asdiv/2", "4")]


@pytest.mark.parametrize("controls", [False, True])
def test_control_rows_only_when_asked(tmp_path, controls):
    qs = 40
    greedy = write_score(tmp_path, "greedy", [1] * 10 + [0] * 30, 1e15)
    maj = write_score(tmp_path, "majority", [1] * 30 + [0] * 10, 4e15)
    a = write_score(tmp_path, "sampled", [1] * 20 + [0] * 20, 1e15)
    aa = write_score(tmp_path, "sampled_aa", [0] * 10 + [1] * 20 + [0] * 10, 1e15)
    out = tmp_path / "claims.csv"
    claims.run([greedy, maj, a, aa], out, controls=controls)
    rows = {r["claim"]: r for r in csv.DictReader(open(out))}
    if not controls:
        assert rows == {}
        return
    pos = rows["positive control: Maj@N beats greedy"]
    assert (pos["method"], pos["baseline"], pos["verdict"], pos["n_questions"]) == (
        "majority",
        "greedy",
        "supported",
        str(qs),
    )
    aa_row = rows["negative control (A/A): the same method on other seeds"]
    assert (aa_row["method"], aa_row["baseline"], aa_row["verdict"]) == (
        "sampled_aa",
        "sampled",
        "inconclusive",
    )
    assert "holm over 2 claims" in pos["correction"]


def test_controls_flag_is_read_and_checked():
    assert claims.controls_flag({"claims": {"controls": True}}) is True
    assert claims.controls_flag({}) is False
    with pytest.raises(ValueError, match="controls must be true or false"):
        claims.controls_flag({"claims": {"controls": "yes"}})
    assert claims.weaker_pairs({"claims": {"controls": True}}) == []


def test_cpu_jobs_are_priced_in_cpu_hours_at_the_probe_rate_or_the_default(tmp_path):
    planned = [j for j in jobs(check_global({"experiment": "smoke"})) if j.dataset != "smoke_math_mini"]
    assumed = estimate(planned, None)
    assert assumed.cpu_jobs == 4 and assumed.gpu_jobs == 0
    assert assumed.cpu_hours == pytest.approx(assumed.generated_tokens / DEFAULT_CPU_TOK_S / 3600)
    assert "GPU-hours" not in assumed.line() and "assumed, no probe yet" in assumed.line()
    probe = tmp_path / "probe" / planned[0].model
    probe.mkdir(parents=True)
    (probe / f"{planned[0].backend}.json").write_text(json.dumps({"tok_s": 2 * DEFAULT_CPU_TOK_S}))
    measured = estimate(planned, None, probe_dir=tmp_path / "probe")
    assert measured.cpu_hours == pytest.approx(assumed.cpu_hours / 2)
    assert f"{2 * DEFAULT_CPU_TOK_S:,.0f} tok/s measured by probe" in measured.line()


def test_gpu_jobs_keep_gpu_hours():
    est = estimate(jobs(check_global({"experiment": "paper"})), "/nonexistent-mirror")
    assert est.gpu_jobs == est.jobs and est.cpu_jobs == 0
    assert "GPU-hours" in est.line() and "CPU wall time" not in est.line()
