"""The DRR leak check over stored prompts and DM rows: clean data passes, a planted gold fails."""
import json

import pytest

from retrace import data
from retrace.drr import leakcheck, prompts, reasoner, stages
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


@pytest.mark.parametrize("plant", ["The correct answer is 1.", "Hint: Jupiter", "ground truth: (B)"])
def test_a_planted_gold_in_a_prompt_fails(tmp_path, plant):
    qfile, pfile = stored(tmp_path, TurnLLM())
    recs = [json.loads(x) for x in pfile.read_text().splitlines()]
    recs[5]["messages"][0]["content"] += "\n" + plant  # harness-written system prompt
    pfile.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    out = leakcheck.run(cfg(), [qfile], [pfile], tmp_path / "leak.json")
    assert out["verdict"] == "fail" and out["findings"][0]["line"] == 6
    with pytest.raises(SystemExit, match="gold leak check: fail"):
        leakcheck.run(cfg(), [qfile], [pfile], tmp_path / "leak.json", strict=True)


def test_a_dm_row_with_the_gold_injected_as_a_final_turn_fails(tmp_path):
    """The upstream bug: the ground truth appended to the context of a training row."""
    p = PROBLEMS[0]
    row = {"row_id": f"{p.id}#1", "id": p.id, "dataset": "t", "turn": 1, "question": prompts.question_text(p),
           "context": [{"answer": "0", "rationale": "red"}, {"answer": "Jupiter", "rationale": "gold"}],
           "answer": "2", "rationale": "hot", "label": 0}
    qfile, rows = tmp_path / "q.jsonl", tmp_path / "train.jsonl"
    data.write_problems(qfile, PROBLEMS)
    rows.write_text(json.dumps(row) + "\n")
    out = leakcheck.run(cfg(), [qfile], [rows], tmp_path / "leak.json")
    assert out["verdict"] == "fail" and out["by_kind"] == {"rejected_attempt_is_gold": 1}
