"""Gold-leak check (discriminator/leak.py): planted leaks are found, innocent text is not."""

import json

from retrace.discriminator import dataset as ds
from retrace.discriminator import leak
from retrace.records import Problem

P = Problem(
    id="q1", question="What is the capital of France?", gold="B", choices=("Lyon", "Paris", "Nice", "Lille")
)
QUESTION = "What is the capital of France?\nA. Lyon\nB. Paris\nC. Nice\nD. Lille"
SYSTEM = (
    "You are a knowledgeable question-answering assistant. Provide your choice along with a "
    "brief explanation. Respond only with: Answer: [Provide the answer here] "
    "Rationale: [Provide the rationale here]"
)


def prompt(*extra_user):
    return {
        "problem_id": "q1",
        "key": "k1",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "\n".join((QUESTION, *extra_user))},
        ],
    }


def write(tmp_path, rows):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_clean_prompts_and_rows_pass(tmp_path):
    rows = ds.rows_from_trace(
        {
            "id": "q1",
            "question": QUESTION,
            "attempts": [
                {"answer": "A", "rationale": "Lyon is large.", "verdict": "reject"},
                {"answer": "B", "rationale": "Paris is the capital.", "verdict": "accept"},
            ],
        }
    )
    rows = [{**r, "text": ds.dm_input_text(r)} for r in rows]
    report = leak.scan_files([write(tmp_path, [prompt(), *rows])], [P])
    assert report["verdict"] == "pass" and report["n_records"] == 3, report["findings"]


def test_planted_leak_is_found_with_its_location(tmp_path):
    path = write(tmp_path, [prompt(), prompt(), prompt("Ground truth: B")])
    report = leak.scan_files([path], [P])
    assert report["verdict"] == "fail"
    f = report["findings"][0]
    assert (f["file"], f["line"], f["row_id"], f["problem_id"]) == (str(path), 3, "k1", "q1")
    assert f["field"] == "messages[1].user" and f["kind"] == "answer_statement"


def test_gold_option_text_triggers_outside_the_choice_listing():
    hits = leak.scan_record(prompt("Hint: think of paris."), P)
    assert [h.kind for h in hits] == ["option_text"]
    assert leak.scan_record(prompt("Hint: think of Lyon."), P) == []  # a wrong option is fine


def test_innocent_letters_do_not_trigger():
    gold_a = Problem(id="q2", question="Pick one.", gold="A", choices=("red", "blue"))
    innocent = [
        "A student wrote: the answer: A common mistake is to rush.",
        "Choose option B or option A after reading. The answer is a bit tricky.",
        "Answer: [Provide the answer here]",
    ]
    for text in innocent:
        assert leak.scan_text(text, gold_a) == [], text
    for text in ("Consider option B carefully.", "Vitamin B and plan B.", "(B) is listed below"):
        assert leak.scan_text(text, P) == [], text


def test_explicit_statements_of_the_gold_letter_trigger():
    for text in ("The correct answer is B.", "Answer: (B)", "gold label = B", "answer is **B**"):
        assert [k for k, _ in leak.scan_text(text, P)] == ["answer_statement"], text
    assert leak.scan_text("The correct answer is C.", P) == []  # not the gold
    gold_a = Problem(id="q2", question="Pick one.", gold="A", choices=("red", "blue"))
    assert leak.scan_text("The answer is A.", gold_a) != []


def test_zero_based_indices_are_checked_by_default():
    # The paper's prompts number choices from 0 and ask for the index (Appendix B); B is 1 there.
    assert [k for k, _ in leak.scan_text("Answer: 1", P)] == ["answer_statement"]
    assert leak.scan_text("Answer: 2", P) == []  # index 2 is C, not the gold
    assert leak.scan_text("Answer: 1", P, index_bases=()) == []  # no numbering declared
    assert leak.scan_text("Answer: 2", P, index_bases=(1,)) != []  # a 1-based numbering


# Planted leaks, one per shape a prompt or DM row can state the gold B / 1 / "Paris" in.
SHAPES = {
    "letter with cue": ("Key: B", {"answer_statement"}),
    "bracketed letter with cue": ("Correct: (B)", {"answer_statement"}),
    "index with cue": ("Hint: 1", {"answer_statement"}),
    "index with 'Correct:'": ("Correct: 1", {"answer_statement"}),
    "index with 'the right option is'": ("the right option is 1.", {"answer_statement"}),
    "index. text with cue": ("Answer: 1. Paris", {"answer_statement", "index_text", "option_text"}),
    "index. text without cue": ("1. Paris", {"index_text", "option_text"}),
    "letter) text without cue": ("B) Paris", {"index_text", "option_text"}),
    "text with cue": ("Hint: Paris", {"option_text"}),
    "text without cue": ("remember paris", {"option_text"}),
}


def test_every_planted_shape_is_found():
    for name, (text, kinds) in SHAPES.items():
        assert {k for k, _ in leak.scan_text(text, P)} == kinds, name


def test_index_and_short_text_is_found_though_the_text_alone_is_not():
    p = Problem(id="q3", question="Is the sky green?", gold="B", choices=("yes", "no"))
    assert leak.scan_text("Listen: no way.", p) == []  # "no" is too short to search alone
    assert [k for k, _ in leak.scan_text("Key: 1. no", p)] == ["answer_statement", "index_text"]
    assert [k for k, _ in leak.scan_text("see 1) no", p)] == ["index_text"]


def test_the_full_choice_listing_is_not_a_leak_but_a_single_entry_is():
    listing = "Question: capital?\nChoices:\n0. Lyon\n1. Paris\n2. Nice\n3. Lille"
    assert leak.scan_text(listing, P) == []
    assert leak.scan_text("Q: capital? Choices: 0. Lyon 1. Paris 2. Nice 3. Lille", P) == []
    assert leak.scan_text("(A) Lyon (B) Paris (C) Nice (D) Lille", P) == []
    assert leak.scan_text("Choices:\n1. Paris", P) != []  # not the question's own listing


def test_bare_letters_and_indices_without_a_cue_do_not_trigger():
    """Instructions are full of letters and numbers; without a cue or the option text they
    state nothing (the current intent, kept)."""
    for text in (
        "Provide your choice (e.g., 0, 1, 2, etc).",
        "This is turn 1 of 3.",
        "Plan B.",
        "(B) is listed below",
        "LLM Answer 1: 0",
        "Answer: 1.5 units",
    ):
        assert leak.scan_text(text, P) == [], text


def test_rejected_attempt_equal_to_gold_is_flagged_in_training_rows():
    row = {
        "row_id": "q1#1",
        "id": "q1",
        "label": 1,
        "question": QUESTION,
        "context": [{"answer": "B", "rationale": "injected final turn"}],
        "answer": "B",
        "rationale": "Paris.",
    }
    hits = leak.scan_record(row, P)
    assert [h.kind for h in hits] == ["rejected_attempt_is_gold"] and hits[0].field == "context[0].answer"


def test_injected_feedback_in_context_is_found():
    row = {
        "row_id": "q1#1",
        "id": "q1",
        "label": 0,
        "question": QUESTION,
        "context": [{"answer": "A", "rationale": "Lyon.", "feedback": "No - the answer is B"}],
        "answer": "C",
        "rationale": "Nice.",
    }
    hits = leak.scan_record(row, P)
    assert [(h.field, h.kind) for h in hits] == [("context[0].feedback", "answer_statement")]


def test_unknown_problem_makes_the_verdict_incomplete(tmp_path):
    report = leak.scan_files([write(tmp_path, [{**prompt(), "problem_id": "zz"}])], [P])
    assert report["verdict"] == "incomplete" and report["n_unchecked"] == 1


def test_open_ended_gold():
    p = Problem(id="m", question="What is 6 * 7?", gold="42")
    assert leak.scan_text("Reminder: the final answer is 42.", p) != []
    assert leak.scan_text("Show your work in 4 steps.", p) == []


def test_a_model_echo_overlapping_the_listing_does_not_expose_the_gold():
    """Seen on real SmolLM2 output: a rationale "1. Paris" is also a piece of the question's
    listing; blanking it first broke the full-listing match and the rest was reported."""
    listing = "Question: capital?\nChoices:\n0. Lyon\n1. Paris\n2. Nice\n3. Lille"
    assert leak.scan_text(listing, P, model_spans=["1. Paris", "Lyon\n1"]) == []
    assert leak.scan_text(listing + "\nHint: 1", P, model_spans=["1. Paris"]) != []
