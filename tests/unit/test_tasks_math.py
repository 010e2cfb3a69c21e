"""Maths answer extraction and math-verify equivalence on realistic model outputs."""

import threading

import pytest

from retrace.tasks._math import extract_math, extract_math_answer, last_boxed
from retrace.util.records import Problem
from retrace.util.registry import TASKS


def problem(gold):
    return Problem(id="p", question="q", gold=gold)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("First, 3 + 4 = 7, then halve it.\nThe answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("Janet has 20 dollars and spends 2. So she has 18 dollars left.", "18"),
        ("She makes 9 * 2 = 18 per day.\n#### 72", "72"),
        ("Total: 1,250 + 250 = 1,500 meters.", "1500"),
        ("So the probability is $\\boxed{\\dfrac{3}{4}}$.", "\\dfrac{3}{4}"),
        ("We try \\boxed{5} first, but that fails; the final answer is \\boxed{7}.", "7"),
        ("Thus $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("\\boxed{x^{2}+\\sqrt{2}}", "x^{2}+\\sqrt{2}"),
        ("I cannot solve this problem.", None),
        ("", None),
    ],
)
def test_extract(text, expected):
    assert extract_math_answer(text) == expected


def test_unclosed_box_is_no_answer():
    # cut off while writing the answer: the number inside the open box is not an answer
    assert last_boxed("\\boxed{\\frac{1}{2}") is None
    assert extract_math("so 12 eggs \\boxed{\\frac{1}{2") == (None, "none")
    assert extract_math("\\boxed{7}, then \\boxed{3") == (None, "none")
    assert extract_math("so \\boxed{3") == (None, "none")


@pytest.mark.parametrize(
    "text, answer, source",
    [
        ("so \\boxed{36}.", "36", "boxed"),
        ("9 * 4 = 36\n#### 36", "36", "statement"),
        ("The final answer is 36.", "36", "statement"),
        ("Answer: 1,200 dollars", "1200", "statement"),
        ("There are 5 boxes. The solution is correct.", "5", "fallback"),
        ("The solution is correct.", None, "none"),
        # the prompt's format placeholder echoed back is not a box
        ("put your final answer within \\boxed{}. The answer is 12.", "12", "statement"),
    ],
)
def test_extraction_sources(text, answer, source):
    assert extract_math(text) == (answer, source)


@pytest.mark.parametrize("gold, answer", [("25", "25\\%"), ("25", "25%"), ("12.5", "12.5 \\%")])
def test_percent_sign_is_dropped(gold, answer):
    assert TASKS.get("gsm8k").is_correct(answer, problem(gold))


@pytest.mark.parametrize(
    "task, gold, text",
    [
        ("gsm8k", "18", "She sells 9 eggs at $2 each, so she makes 18 dollars.\n#### 18"),
        ("amc23", "27", "They meet after 1.5 hours, at 27 miles from A: \\boxed{27.0}"),
        ("math500", "\\frac{14}{3}", "so $x = \\boxed{\\dfrac{14}{3}}$"),
        ("math500", "\\left( 3, \\frac{\\pi}{2} \\right)", "$\\boxed{(3, \\frac{\\pi}{2})}$"),
        ("math500", "\\frac{1}{2}", "The value is \\boxed{0.5}."),
        ("gsm8k", "1500", "The total is \\boxed{1,500}."),
        ("gsm8k", "18", "\\boxed{\\$18}"),
    ],
)
def test_correct(task, gold, text):
    t = TASKS.get(task)
    assert t.is_correct(t.extract_answer(text, problem(gold)), problem(gold))


@pytest.mark.parametrize(
    "gold, text",
    [
        ("18", "She makes 16 dollars.\n#### 16"),
        ("\\frac{1}{2}", "\\boxed{\\frac{1}{3}}"),
        ("18", "asdf qwerty \\boxed{}"),
        ("18", "I don't know"),
    ],
)
def test_incorrect_or_garbage_is_false_not_error(gold, text):
    t = TASKS.get("gsm8k")
    assert t.is_correct(t.extract_answer(text, problem(gold)), problem(gold)) is False


def test_none_answer_is_incorrect():
    assert TASKS.get("math500").is_correct(None, problem("1")) is False


def test_float_gold_equals_integer_answer():
    # AMC/AIME mirrors store "27.0"; a model writing 27 is right.
    assert TASKS.get("amc23").is_correct("27", problem("27.0"))


def test_same_answer_uses_math_equivalence():
    t = TASKS.get("math500")
    assert t.same_answer("\\frac{1}{2}", "0.5")
    assert t.same_answer("\\dfrac{3}{4}", "\\frac34")
    assert not t.same_answer("2", "3")


def test_works_outside_main_thread():
    # math-verify's SIGALRM timeout cannot be armed off the main thread.
    out = []
    th = threading.Thread(
        target=lambda: out.append(TASKS.get("math500").is_correct("\\frac{2}{4}", problem("\\frac{1}{2}")))
    )
    th.start()
    th.join()
    assert out == [True]
