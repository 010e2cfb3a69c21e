"""Gold-leak check (drr/leak.py): planted leaks are found, innocent text is not."""

import json

from retrace.drr import dm_data as ds
from retrace.drr import leak, leak_text
from retrace.util.records import Problem

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
        assert leak_text.scan_text(text, gold_a) == [], text
    for text in ("Consider option B carefully.", "Vitamin B and plan B.", "(B) is listed below"):
        assert leak_text.scan_text(text, P) == [], text


def test_explicit_statements_of_the_gold_letter_trigger():
    for text in ("The correct answer is B.", "Answer: (B)", "gold label = B", "answer is **B**"):
        assert [k for k, _ in leak_text.scan_text(text, P)] == ["answer_statement"], text
    assert leak_text.scan_text("The correct answer is C.", P) == []  # not the gold
    gold_a = Problem(id="q2", question="Pick one.", gold="A", choices=("red", "blue"))
    assert leak_text.scan_text("The answer is A.", gold_a) != []


def test_indices_behind_a_cue_count_from_0_and_from_1():
    # The paper's prompts number choices from 0 (Appendix B): B is 1 there; a leak may count from 1.
    for text in ("Answer: 1", "Hint: 2", "Correct: 2", "gold=2", "gold = 1"):
        assert [k for k, _ in leak_text.scan_text(text, P)] == ["answer_statement"], text
    assert leak_text.scan_text("Answer: 3", P) == [] and leak_text.scan_text("Answer: 0", P) == []  # C / A
    assert leak_text.scan_text("Answer: 2", P, index_bases=(0,)) == []  # only 0-based declared


# Planted leaks, one per shape a prompt or DM row can state the gold B / 1 / 2 / "Paris" in:
# (text, kind of the first finding).
SHAPES = {
    "letter with cue": ("Key: B", "answer_statement"),
    "bracketed letter with cue": ("Correct: (B)", "answer_statement"),
    "0-based index with cue": ("Hint: 1", "answer_statement"),
    "1-based index with cue": ("Hint: 2", "answer_statement"),
    "index with 'gold='": ("gold=2", "answer_statement"),
    "index with 'the right option is'": ("the right option is 1.", "answer_statement"),
    "index. text with cue": ("Answer: 1. Paris", "answer_statement"),
    "index. text without cue": ("1. Paris", "index_text"),
    "letter) text without cue": ("B) Paris", "index_text"),
    "text with cue": ("Hint: Paris", "answer_statement"),
    "quoted text with cue": ('the correct answer is "Paris".', "answer_statement"),
    "text without cue": ("remember paris", "option_text"),
    "ordinal": ("The expected option is the second one.", "answer_statement"),
    "numeric ordinal": ("ground truth: the 2nd option", "answer_statement"),
    "option N after a cue": ("the answer is option 2", "answer_statement"),
    "choose option N": ("Hint: pick option 1", "answer_statement"),
    "option N is correct": ("Option 2 is correct.", "answer_statement"),
    "letter is the answer": ("B is the answer", "answer_statement"),
    "ordinal is right": ("the second one is right", "answer_statement"),
}


def test_every_planted_shape_is_found():
    for name, (text, kind) in SHAPES.items():
        hits = leak_text.scan_text(text, P)
        assert hits and hits[0][0] == kind, (name, hits)


def test_a_cue_followed_by_a_short_option_text_is_found_but_not_an_instruction():
    yes = Problem(id="q4", question="Is the sky blue?", gold="A", choices=("yes", "no"))
    no = Problem(id="q5", question="Is the sky green?", gold="B", choices=("yes", "no"))
    assert [k for k, _ in leak_text.scan_text("Ground truth label: no", no)] == ["answer_statement"]
    assert [k for k, _ in leak_text.scan_text("Answer: yes.", yes)] == ["answer_statement"]
    assert [k for k, _ in leak_text.scan_text("yes is correct", yes)] == ["answer_statement"]
    for text in ("Answer yes or no.", "The answer is yes or no", "Be brief: yes, it matters."):
        assert leak_text.scan_text(text, yes) == [], text
    assert leak_text.scan_text("Answer: no more than 3 words", no) == []
    assert leak_text.scan_text("Hint: the last one", P) == []  # B is not the last choice
    assert leak_text.scan_text("Hint: the last one", no) != []


def test_a_one_word_gold_in_drr_template_text_is_not_a_leak():
    """Real CommonsenseQA golds "outside" and "choice": words of the fixed system prompts."""
    from retrace.util.templates import render

    for gold_word in ("outside", "choice", "box", "list"):
        p = Problem(id="w", question="Where?", gold="C", choices=("inside", "under", gold_word))
        for template in ("drr/exploration.j2", "drr/standard_qa.j2", "drr/abstain_qa.j2"):
            assert leak_text.scan_text(render(template), p) == [], (gold_word, template)
        edited = render("drr/exploration.j2").replace("the box", f"the box (hint: {gold_word})")
        assert leak_text.scan_text(edited, p) != []  # a template with a planted hint is not the template


def test_index_and_short_text_is_found_though_the_text_alone_is_not():
    p = Problem(id="q3", question="Is the sky green?", gold="B", choices=("yes", "no"))
    assert leak_text.scan_text("Listen: no way.", p) == []  # "no" is too short to search alone
    assert [k for k, _ in leak_text.scan_text("Key: 1. no", p)] == ["answer_statement"]
    assert [k for k, _ in leak_text.scan_text("see 1) no", p)] == ["index_text"]


def test_the_full_choice_listing_is_not_a_leak_but_a_single_entry_is():
    listing = "Question: capital?\nChoices:\n0. Lyon\n1. Paris\n2. Nice\n3. Lille"
    assert leak_text.scan_text(listing, P) == []
    assert leak_text.scan_text("Q: capital? Choices: 0. Lyon 1. Paris 2. Nice 3. Lille", P) == []
    assert leak_text.scan_text("(A) Lyon (B) Paris (C) Nice (D) Lille", P) == []
    assert leak_text.scan_text("Choices:\n1. Paris", P) != []  # not the question's own listing
    spaced = Problem(
        id="s", question="Fix it?", gold="B", choices=("use glue ", "finish, woodgrain with  bobby pin ")
    )
    assert (
        leak_text.scan_text(
            "Question: Fix it?\nChoices:\n0. use glue\n1. finish, woodgrain with  bobby pin", spaced
        )
        == []
    )


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
        assert leak_text.scan_text(text, P) == [], text


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
    assert leak_text.scan_text("Reminder: the final answer is 42.", p) != []
    assert leak_text.scan_text("Show your work in 4 steps.", p) == []


def test_a_model_echo_overlapping_the_listing_does_not_expose_the_gold():
    """Seen on real SmolLM2 output: a rationale "1. Paris" is also a piece of the question's
    listing; blanking it first broke the full-listing match and the rest was reported."""
    listing = "Question: capital?\nChoices:\n0. Lyon\n1. Paris\n2. Nice\n3. Lille"
    assert leak_text.scan_text(listing, P, model_spans=["1. Paris", "Lyon\n1"]) == []
    assert leak_text.scan_text(listing + "\nHint: 1", P, model_spans=["1. Paris"]) != []
