"""`make controls` pieces (issue 31): the ASDiv task, the control claim rows, CPU time estimates."""

from __future__ import annotations

import csv
import json

import pytest

from retrace.config.compose import check_global
from retrace.planning.estimate import DEFAULT_CPU_TOK_S, estimate
from retrace.planning.plan import jobs
from retrace.scoring import preregistered
from retrace.scoring.claims import CONTROL_CLAIMS
from retrace.stages import claims
from retrace.store.provenance import prov_path
from retrace.util.hashing import sha256_file
from retrace.util.registry import TASKS
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


def write_maj(tmp_path, samples, label="majority"):
    """A Maj@N score file whose per-problem sample correctness is `samples` (problems x N)."""
    path = tmp_path / f"{label}.json"
    per_problem = [
        {"id": f"q{i}", "vote_correct": sum(c) * 2 > len(c), "correct": list(map(bool, c))}
        for i, c in enumerate(samples)
    ]
    job = {"model": "m", "backend": "b", "dataset": "d", "method": label, "seed": 0}
    n = sum(len(c) for c in samples)
    path.write_text(
        json.dumps({"job": job, "flops": {"effective": 4e15}, "per_problem": per_problem, "n_samples": n})
    )
    prov_path(path).write_text(json.dumps({"artifact": {"sha256": sha256_file(path)}}))
    return path


@pytest.mark.parametrize("controls", [False, True])
def test_control_rows_only_when_asked(tmp_path, controls):
    # 40 questions: greedy right on 10; Maj@4 right on 30; samples 0 and 1 disagree on 20
    # questions, 10 each way (an A/A with discordant pairs, not identical copies)
    greedy = write_score(tmp_path, "greedy", [1] * 10 + [0] * 30, 1e15)
    samples = [[1, 1, 1, 0]] * 10 + [[1, 0, 1, 1]] * 10 + [[0, 1, 1, 1]] * 10 + [[0, 0, 0, 0]] * 10
    maj = write_maj(tmp_path, samples)
    out = tmp_path / "claims.csv"
    claims.run([greedy, maj], out, controls=controls)
    rows = {r["claim"]: r for r in csv.DictReader(open(out))}
    if not controls:
        assert rows == {}
        return
    pos = rows["positive control: Maj@N beats greedy"]
    assert (pos["method"], pos["baseline"], pos["verdict"], pos["n_questions"]) == (
        "majority",
        "greedy",
        "supported",
        "40",
    )
    aa = rows["negative control (A/A): one sample vs another, other seeds"]
    assert (aa["method"], aa["baseline"], aa["verdict"]) == (
        "majority#sample1",
        "majority#sample0",
        "inconclusive",
    )
    assert (aa["wins"], aa["losses"], aa["acc_method"]) == ("10", "10", "0.5")
    assert "holm over 2 claims" in pos["correction"]


def test_a_real_difference_between_the_two_samples_is_called(tmp_path):
    # the A/A rows use the same engine: were sample 1 much better, it would not read inconclusive
    samples = [[0, 1, 0, 0]] * 30 + [[1, 1, 0, 0]] * 10
    rows = claims.claim_rows(*claims.load_runs([write_maj(tmp_path, samples)])[:2], claims=CONTROL_CLAIMS)
    (aa,) = rows
    assert aa["verdict"] == "supported" and aa["delta"] == pytest.approx(0.75)


def test_controls_flag_is_read_and_checked():
    assert preregistered.controls_flag({"claims": {"controls": True}}) is True
    assert preregistered.controls_flag({}) is False
    with pytest.raises(ValueError, match="controls must be true or false"):
        preregistered.controls_flag({"claims": {"controls": "yes"}})
    assert preregistered.weaker_pairs({"claims": {"controls": True}}) == []


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


# --- answers read as models write them (issue 31, item 3) ---------------------------------

MATH_FORMS = [
    # bold value: chat models' markdown for the final answer
    ("So she has 42 left. The answer is **42**.", "42", "statement", "statement:bold"),
    ("Answer: **1,200**", "1200", "statement", "statement:bold"),
    # the DRR prompts' placeholder echoed before the answer
    ("Answer: [Provide the answer here] 3", "3", "statement", "statement:after-placeholder"),
    ("The answer is 7.", "7", "statement", "statement:answer-is"),
    ("9 * 4 = 36\n#### 36", "36", "statement", "statement:####"),
    ("so \\boxed{36}.", "36", "boxed", "boxed"),
    ("There are 5 boxes.", "5", "fallback", "fallback:last-number"),
]


@pytest.mark.parametrize("text, answer, source, path", MATH_FORMS)
def test_math_statement_forms_and_their_paths(text, answer, source, path):
    from retrace.tasks._math import extract_math

    found = extract_math(text)
    assert (found.answer, found.source, found.path) == (answer, source, path)


CHOICES = ("red", "blue", "green", "yellow")
# (text, letter at the DRR prompts' 0-based numbering); both parsers must read each the same
MC_FORMS = [
    ("The correct option is C because green is a colour.", "C"),
    ("The correct option is 2 because green is a colour.", "C"),
    ("Answer: [Provide the answer here] 3", "D"),
    ("Answer: [Provide the answer here] B Rationale: it is blue.", "B"),
    ("Answer: 2 Rationale: green.", "C"),
    ("Answer: (1) Rationale: blue.", "B"),
    ("Answer: option 0", "A"),
    ("Answer: yellow Rationale: the sun.", "D"),
    ("Answer: B", "B"),
]


@pytest.mark.parametrize("text, letter", MC_FORMS)
def test_both_multiple_choice_parsers_agree_at_the_prompts_numbering(text, letter):
    from retrace.drr.prompts import INDEX_BASE, reply_letter
    from retrace.tasks._choice import extract_choice

    assert extract_choice(text, CHOICES, index_base=INDEX_BASE) == letter
    assert reply_letter(text, CHOICES) == letter


def test_choice_task_numbers_follow_its_letter_prompt():
    from retrace.tasks._choice import ChoiceTask
    from retrace.util.records import Problem

    # mc_cot.j2 lists A) B) C): "option 2" is the second option, at base 1
    p = Problem(id="x", question="q", gold="B", choices=CHOICES)
    found = TASKS.get("smoke_mc").extract("Answer: [Provide the answer here] option 2", p)
    assert ChoiceTask.index_base == 1 and found.answer == "B"
    assert found.path == "statement:after-placeholder"


def test_drr_abstention_stays_an_abstention():
    from retrace.drr.prompts import reply_letter

    assert reply_letter("Answer: none of the above Rationale: option 2 is wrong", CHOICES) is None


def test_results_count_each_extraction_path():
    from retrace.scoring.score import provenance_rates, result_columns, score_problem
    from retrace.util.records import Problem

    task = TASKS.get("asdiv")
    p = Problem(id="asdiv/0", question="q", gold="42")
    texts = ["The answer is **42**.", "\\boxed{42}", "\\boxed{41}", "so 42"]
    row = {"samples": [{"text": t, "finish_reason": "stop"} for t in texts]}
    rates = provenance_rates([score_problem(row, p, task)])
    assert rates["answer_paths"] == {"boxed": 2, "statement:bold": 1, "fallback:last-number": 1}
    cols = result_columns({**rates, "tokens": {"generated": 0}, "n_problems": 1})
    assert cols["answer_paths"] == "boxed=2; statement:bold=1; fallback:last-number=1"


def test_smoke_report_opens_with_the_banner_naming_make_controls(tmp_path):
    from retrace.report.html import render_html, smoke_banner

    probe = tmp_path / "probe" / "qwen2.5-coder-0.5b-q4km" / "llamacpp.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"tok_s": 2 * DEFAULT_CPU_TOK_S}))
    assumed, measured = smoke_banner([{"n_questions": "4"}]), smoke_banner([{"n_questions": 4}], [probe])
    assert assumed.startswith("smoke run: verdicts are inconclusive by rule (n < 10)")
    assert "`make controls` (≈ 1.4 h here)" in assumed and "(≈ 0.7 h here)" in measured
    assert smoke_banner([{"n_questions": "200"}]) == ""
    page = render_html([], [], banner=assumed)
    assert page.index("smoke run:") < page.index("<h2")
