"""The DRR leak check over stored prompts and DM rows: clean data passes, a planted gold fails."""

import json

import pytest

from retrace.drr import leakcheck, prompts, reasoner, stages
from retrace.store import data
from tests.unit.drr_fakes import PROBLEMS, TurnLLM, cfg


def stored(tmp_path, llm):
    qfile = tmp_path / "q.jsonl"
    data.write_problems(qfile, PROBLEMS)
    paths = reasoner.rejection_paths(PROBLEMS, llm, cfg(), 0, 3)
    recs = [r for p in PROBLEMS for r in stages.prompt_records(p.id, paths[p.id]["turns"])]
    pfile = tmp_path / "prompts.jsonl"
    pfile.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return qfile, pfile


def test_real_prompts_with_correct_past_answers_pass(tmp_path):
    # the reasoner answers the gold (1) on turn 2 and it is echoed in turn 3's prompt: model text
    qfile, pfile = stored(tmp_path, TurnLLM({"": ["0", "1", "2"]}))
    out = leakcheck.run(cfg(), [qfile], [pfile], tmp_path / "leak.json")
    assert out["verdict"] == "pass" and out["n_records"] == 12


# Every shape a prompt can state the gold in (PROBLEMS' gold is B = index 1 = "Jupiter"):
# text, letter, 0-based index, index + text, with and without a cue word.
PLANTS = [
    "The correct answer is 1.",
    "Hint: Jupiter",
    "ground truth: (B)",
    "Answer: 1. Jupiter",
    "Hint: 1",
    "Key: B",
    "Correct: 1",
    "1. Jupiter",
    "(B) Jupiter",
    "Jupiter",
]


@pytest.mark.parametrize("plant", PLANTS)
def test_a_planted_gold_in_a_prompt_fails_the_job_by_default(tmp_path, plant):
    qfile, pfile = stored(tmp_path, TurnLLM())
    recs = [json.loads(x) for x in pfile.read_text().splitlines()]
    recs[5]["messages"][0]["content"] += "\n" + plant  # harness-written system prompt
    pfile.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with pytest.raises(SystemExit, match=r"(?s)gold leak check: fail .*prompts.jsonl:6 messages\[0\].system"):
        leakcheck.run(cfg(), [qfile], [pfile], tmp_path / "leak.json")
    assert not (tmp_path / "leak.json").exists()
    out = leakcheck.run(cfg(leak_check="report"), [qfile], [pfile], tmp_path / "leak.json")
    assert out["verdict"] == "fail" and out["findings"][0]["line"] == 6 and out["mode"] == "report"


def test_summarise_refuses_a_leaking_verdict_unless_report_only():
    bad = {
        "verdict": "fail",
        "n_findings": 1,
        "n_unchecked": 0,
        "findings": [
            {"file": "p.jsonl", "line": 3, "field": "f", "kind": "answer_statement", "excerpt": "Key: B"}
        ],
    }
    with pytest.raises(SystemExit, match="no claims are written"):
        leakcheck.refuse(bad, "fail", "leak.json")
    leakcheck.refuse(bad, "report", "leak.json")
    leakcheck.refuse({**bad, "verdict": "pass"}, "fail", "leak.json")


def test_a_dm_row_with_the_gold_injected_as_a_final_turn_fails(tmp_path):
    """The upstream bug: the ground truth appended to the context of a training row."""
    p = PROBLEMS[0]
    row = {
        "row_id": f"{p.id}#1",
        "id": p.id,
        "dataset": "t",
        "turn": 1,
        "question": prompts.question_text(p),
        "context": [{"answer": "0", "rationale": "red"}, {"answer": "Jupiter", "rationale": "gold"}],
        "answer": "2",
        "rationale": "hot",
        "label": 0,
    }
    qfile, rows = tmp_path / "q.jsonl", tmp_path / "train.jsonl"
    data.write_problems(qfile, PROBLEMS)
    rows.write_text(json.dumps(row) + "\n")
    out = leakcheck.run(cfg(leak_check="report"), [qfile], [rows], tmp_path / "leak.json")
    assert out["verdict"] == "fail" and out["by_kind"] == {"rejected_attempt_is_gold": 1}


def test_gradual_prompts_with_a_correct_past_answer_pass(tmp_path):
    """The gradual re-prompt echoes past attempts (one correct) between its Env: lines."""
    qfile = tmp_path / "q.jsonl"
    data.write_problems(qfile, PROBLEMS)
    paths = reasoner.rejection_paths(
        PROBLEMS, TurnLLM({"": ["0", "1. Jupiter", "2"]}), cfg(strategy="gradual"), 0, 3
    )
    recs = [r for p in PROBLEMS for r in stages.prompt_records(p.id, paths[p.id]["turns"])]
    assert any("Env:" in m["content"] and "1. Jupiter" in m["content"] for r in recs for m in r["messages"])
    pfile = tmp_path / "prompts.jsonl"
    pfile.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert leakcheck.run(cfg(), [qfile], [pfile], tmp_path / "leak.json")["verdict"] == "pass"
