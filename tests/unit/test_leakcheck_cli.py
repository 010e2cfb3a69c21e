"""`retrace leakcheck --jsonl FILE` on anyone's prompts: every leak shape is reported, every
clean look-alike is not, one JSON line per record, exit 1 when anything leaks."""

from __future__ import annotations

import json

import pytest

from retrace import cli
from retrace.util.templates import render

CHOICES = ["Lyon", "Paris", "Nice", "Lille"]  # gold 1 = "Paris" (B; 2 counting from 1)
LISTING = "Question: What is the capital of France?\nChoices:\n0. Lyon\n1. Paris\n2. Nice\n3. Lille"
YES_NO = ["yes", "no"]

LEAKS = [  # (text, choices, gold): each states the gold
    ("Key: B", CHOICES, 1),
    ("Correct: (B)", CHOICES, 1),
    ("Hint: 1", CHOICES, 1),  # 0-based index behind a cue
    ("Hint: 2", CHOICES, 1),  # 1-based
    ("Correct: 2", CHOICES, 1),
    ("gold=2", CHOICES, 1),
    ("the right option is 1.", CHOICES, 1),
    ("The expected option is the second one.", CHOICES, 1),  # ordinal
    ("ground truth: the 2nd option", CHOICES, 1),
    ("The answer is option 1.", CHOICES, 1),  # option N
    ("Option 2 is correct.", CHOICES, 1),
    ("B is the answer", CHOICES, 1),
    ("Hint: Paris", CHOICES, 1),  # option text behind a cue
    ("Ground truth label: no", YES_NO, 1),  # short option text behind a cue
    ("1. Paris", CHOICES, 1),  # marker and text
    ("see 1) no", YES_NO, 1),
    ("remember paris", CHOICES, 1),  # long option text anywhere
    (LISTING + "\nHint: 1", CHOICES, 1),  # the listing is allowed, what follows it is not
    (render("drr/exploration.j2").replace("the box", "the box (hint: box)"), ["in", "out", "box"], 2),
]
CLEAN = [  # (text, choices, gold): none states the gold
    (LISTING, CHOICES, 1),
    ("Q: What is the capital of France? Choices: 0. Lyon 1. Paris 2. Nice 3. Lille", CHOICES, 1),
    ("(A) Lyon (B) Paris (C) Nice (D) Lille", CHOICES, 1),
    (
        "Question: Fix it?\nChoices:\n0. glue\n1. finish, woodgrain with  bobby pin",
        ["glue ", "finish, woodgrain with bobby pin "],
        1,
    ),
    ("Answer yes or no.", YES_NO, 0),  # an instruction, not a statement of "yes"
    ("The answer is yes or no", YES_NO, 0),
    ("Listen: no way.", YES_NO, 1),  # a short gold alone
    ("Consider option B carefully. Plan B.", CHOICES, 1),  # bare letters
    ("Provide your choice (e.g., 0, 1, 2, etc). This is turn 1 of 3.", CHOICES, 1),  # bare indices
    ("LLM Answer 2: Lyon", CHOICES, 1),  # a heading, not an answer
    ("The correct answer is C. Answer: 3", CHOICES, 1),  # a wrong option stated
    ("Hint: the last one", CHOICES, 1),  # B is not the last
    ("The answer: A student must read.", ["red", "blue"], 0),  # "A" as a word
    (render("drr/exploration.j2"), ["in", "out", "box"], 2),  # "think outside the box"
    (render("drr/standard_qa.j2"), ["pick", "list", "choice"], 2),  # "Provide your choice"
    (render("drr/abstain_qa.j2"), ["in", "outside"], 1),  # "... outside this format"
]


def run(tmp_path, capsys, records):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    rc = cli.main(["leakcheck", "--jsonl", str(path)])
    return rc, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("text,choices,gold", LEAKS)
def test_every_leak_shape_is_reported(tmp_path, capsys, text, choices, gold):
    rc, out = run(tmp_path, capsys, [{"text": text, "choices": choices, "gold": gold}])
    assert rc == 1 and out[0]["leak"] is True and out[0]["findings"], out


@pytest.mark.parametrize("text,choices,gold", CLEAN)
def test_clean_look_alikes_are_not(tmp_path, capsys, text, choices, gold):
    rc, out = run(tmp_path, capsys, [{"text": text, "choices": choices, "gold": gold}])
    assert rc == 0 and out == [{"line": 1, "leak": False, "findings": []}]


def test_one_line_per_record_in_order_with_its_file_line(tmp_path, capsys):
    records = [
        {"text": LISTING, "choices": CHOICES, "gold": 1},
        {"text": LISTING + "\nHint: Paris", "choices": CHOICES, "gold": 1},
        {"text": "What is 6 * 7? Reminder: the final answer is 42.", "gold": "42"},  # open-ended
    ]
    rc, out = run(tmp_path, capsys, records)
    assert rc == 1 and [(o["line"], o["leak"]) for o in out] == [(1, False), (2, True), (3, True)]
    assert out[1]["findings"][0]["kind"] == "answer_statement" and "Paris" in out[1]["findings"][0]["excerpt"]


def test_the_question_and_allowed_texts_may_hold_the_gold(tmp_path, capsys):
    text = "Is Paris in France? Explain, like our house style says: Paris first."
    rec = {"text": text, "choices": ["Paris", "Lyon"], "gold": 0}
    assert run(tmp_path, capsys, [rec])[1][0]["leak"] is True
    allowed = {
        **rec,
        "question": "Is Paris in France?",
        "allowed": ["like our house style says: Paris first."],
    }
    assert run(tmp_path, capsys, [allowed])[1][0]["leak"] is False


def test_a_bad_record_names_its_line(tmp_path, capsys):
    path = tmp_path / "prompts.jsonl"
    bad = [{"text": "x", "choices": CHOICES, "gold": 1}, {"text": "x", "choices": CHOICES, "gold": 4}]
    path.write_text("".join(json.dumps(r) + "\n" for r in bad))
    assert cli.main(["leakcheck", "--jsonl", str(path)]) == 2
    assert "prompts.jsonl:2: gold 4 is not a 0-based index" in capsys.readouterr().err


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"text": "x", "gold"', "prompts.jsonl:2: malformed JSON line: Expecting"),
        ('["text", "gold"]', "prompts.jsonl:2: expected a JSON object"),
    ],
)
def test_a_line_that_is_not_a_json_object_names_its_line(tmp_path, capsys, line, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"text": "x", "choices": CHOICES, "gold": 1}) + "\n" + line + "\n")
    assert cli.main(["leakcheck", "--jsonl", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
