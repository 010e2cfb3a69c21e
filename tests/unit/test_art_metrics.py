"""ART scoring uses each task's own metric; never substring matching."""

import pytest

from retrace.art.metrics import choice_of, format_input, gold_answer, grade, vote
from retrace.util.records import Problem
from retrace.util.registry import TASKS

MC = Problem("q1", "Which planet is largest?", "B", ("Mars", "Jupiter", "A ball"))
EXACT = Problem("q2", "What is 6 times 7?", "42", metadata={"targets": ["42"], "output_regex": None})
PHYS = Problem(
    "q3",
    "Momentum?",
    "540000 kg*m/s",
    metadata={
        "targets": ["540000 kg*m/s"],
        "output_regex": r"(?:[0-9]+\.[0-9]+|[0-9]+)\s[a-zA-Z]+(?:\/[a-zA-Z]+)*",
    },
)
mc_task, exact_task = TASKS.get("bigbench_mc"), TASKS.get("bigbench_exact")


@pytest.mark.parametrize(
    "answer, letter",
    [
        ("(B) Jupiter", "B"),
        ("B", "B"),
        ("B)", "B"),
        ("b.", None),
        ("Jupiter", "B"),
        ("jupiter.", "B"),
        ("A ball", "C"),  # a choice text that starts like a letter marker is that choice
        ("(D) Saturn", None),  # no such option
        ("Mars or Jupiter", None),
        ("", None),
        (None, None),
    ],
)
def test_choice_of_names_exactly_one_option(answer, letter):
    assert choice_of(answer, MC) == letter


def test_a_bare_letter_does_not_match_everything():
    # the released code checked `gold in output`: "A" then matched any MMLU item whose gold was A
    golds = [Problem(f"m{g}", "q", g, ("w", "x", "y", "z")) for g in "ABCD"]
    assert [grade(mc_task, p, "A")[0] for p in golds] == [True, False, False, False]
    assert not grade(mc_task, golds[0], "All of the above are wrong, so I pick B")[0]
    assert not grade(mc_task, golds[1], "A B C D")[0]


def test_exact_match_is_exact_not_substring():
    assert grade(exact_task, EXACT, "42")[0] and grade(exact_task, EXACT, "42.")[0]
    assert not grade(exact_task, EXACT, "420")[0] and not grade(exact_task, EXACT, "the answer 42 or 43")[0]
    assert not grade(exact_task, EXACT, None)[0]


def test_exact_match_applies_the_tasks_output_regex():
    assert grade(exact_task, PHYS, "It is 540000 kg*m/s")[0] is False  # regex keeps "540000 kg"
    assert grade(exact_task, PHYS, "540000 kg*m/s")[1] == "540000 kg"


def test_prompt_forms_and_vote():
    assert format_input(MC).endswith("(A) Mars\n(B) Jupiter\n(C) A ball") and gold_answer(MC) == "(B) Jupiter"
    assert gold_answer(EXACT) == "42"
    assert vote(["(B) Jupiter", "Jupiter", "(A) Mars", None], key=lambda a: choice_of(a, MC)) == "(B) Jupiter"
    assert vote([None, None]) is None and vote(["x", "y"]) == "x"
