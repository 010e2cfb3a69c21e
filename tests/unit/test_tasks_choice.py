"""Multiple-choice letter extraction on realistic (and adversarial) model outputs."""

import pytest

from retrace.tasks._choice import extract_choice
from retrace.util.records import Problem
from retrace.util.registry import TASKS

CHOICES = ("bank", "library", "department store", "mall")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Revolving doors keep air in.\nAnswer: B", "B"),
        ("Let's think. Banks need security, so the answer is (C).", "C"),
        ("After weighing the options, **B**", "B"),
        ("B) library", "B"),
        ("Option 2 is the best fit.", "B"),
        ("answer: c", "C"),
        ("The final answer is: (d)", "D"),
        ("The correct option is **D**.", "D"),
        ("Answer: Option 3", "C"),
        ("Answer: $\\boxed{C}$", "C"),
        ("So the answer is department store.", "C"),
        ("Therefore the answer is C, the department store.", "C"),
        ("library", "B"),
        ("I first thought Answer: A.\nWait, that's wrong. Answer: B", "B"),
        ("A common mistake is to pick the bank, so the answer is D.", "D"),
    ],
)
def test_extract(text, expected):
    assert extract_choice(text, CHOICES) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A common mistake is to think revolving doors are only for convenience.",  # "A" is a word
        "The answer is a bit tricky here.",  # lower-case article, not a letter
        "Answer: E",  # no fifth choice
        "the answer is 7 apples",  # a bare number in prose
        "The answer choices are all plausible.",
        "",
    ],
)
def test_no_answer(text):
    assert extract_choice(text, CHOICES) is None


def test_choice_text_prefers_longest_match():
    choices = ("store", "department store", "bank", "mall")
    assert extract_choice("The answer is department store.", choices) == "B"


def test_numeric_choice_texts_match_by_text_first():
    # MMLU abstract_algebra style: choices are numbers, so "Answer: 2" means the value 2.
    assert extract_choice("The degree is 4.\nAnswer: 4", ("0", "4", "2", "6")) == "B"


def test_two_option_task_rejects_c():
    assert extract_choice("Answer: C", ("Sarah", "Maria")) is None
    assert extract_choice("Answer: Option 2", ("Sarah", "Maria")) == "B"


def test_task_is_correct_and_same_answer():
    t = TASKS.get("smoke_mc")
    p = Problem(id="x", question="q", gold="B", choices=CHOICES)
    assert t.is_correct(t.extract_answer("Answer: b.", p), p)
    assert not t.is_correct(None, p)
    assert t.same_answer("b", "B") and not t.same_answer("A", "B")


def test_choice_sources_and_echoed_format_line():
    from retrace.tasks._choice import extract_choice_sourced as x

    ch = ("red", "green", "blue", "pink")
    assert x("Reasoning.\nAnswer: B", ch) == ("B", "statement")
    assert x("so \\boxed{C}", ch) == ("C", "boxed")
    assert x("I think **D** fits", ch) == ("D", "fallback")
    assert x("no idea", ch) == (None, "none")
    # the prompt's 'finish with a line of the form "Answer: X"' echoed after the real answer
    assert x('Answer: B\nI finished with a line of the form "Answer: X".', ch) == ("B", "statement")


def test_exact_placeholder_echo_is_not_an_answer():
    from retrace.tasks._exact import extract_exact_sourced as x

    assert x("Answer: dog\nformat: Answer: <your answer>") == ("dog", "statement")
    assert x("Answer: <your answer>") == (None, "none")
    assert x("thinking...\ncat") == ("cat", "fallback")


# The multiple-choice forms public graders test (issue 53), each counted by the rule named;
# docs/scoring.md ("Multiple choice") lists them and the forms not counted.
# lm-eval MultiChoiceRegexFilter (lm_eval/filters/extraction.py): "(A)" and a bare "A." line;
# simple-evals common.py ANSWER_PATTERN_MULTICHOICE: "Answer: A"; AMC-style LaTeX letters
# ("\\mathrm{(D)}", "\\textbf{(D) }") as the MATH/AMC solutions write them.
@pytest.mark.parametrize(
    "text, letter, path",
    [
        ("A.", "A", "fallback:line-marker"),
        ("(A)", "A", "fallback:line-marker"),
        ("A. bank", "A", "fallback:line-marker"),
        ("Answer: A", "A", "statement:answer"),
        ("**Answer:** B", "B", "statement:answer"),
        ("The correct answer is (B) library.", "B", "statement:answer"),
        ("The answer is $\\mathrm{(D)}$", "D", "statement:answer"),
        ("The answer is $\\textbf{(D) }mall$", "D", "statement:answer"),
        ("$\\mathrm{(D)}$", "D", "fallback:paren"),
        ("Final Answer: The final answer is $\\boxed{\\text{(C)}}$", "C", "boxed"),
        ("\\boxed{\\textbf{(C)}}", "C", "boxed"),
        ("The answer is mall.", "D", "statement:answer"),
        ("mall", "D", "fallback:choice-text"),
    ],
)
def test_peer_forms_are_counted(text, letter, path):
    found = TASKS.get("commonsenseqa").extract(text, Problem("p", "q", "A", CHOICES))
    assert (found.answer, found.path) == (letter, path)


@pytest.mark.parametrize("text", ["I would go with the big store", "A common mistake is the bank"])
def test_paraphrase_and_prose_letters_are_not_counted(text):
    assert extract_choice(text, CHOICES) is None
