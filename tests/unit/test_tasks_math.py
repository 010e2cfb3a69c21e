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


# Bad input (issue 53): one clear outcome each, never a crash, never a silent "correct".
@pytest.mark.parametrize(
    "text, path",
    [
        ("The answer is \\boxed{}.", "none"),  # the empty box is the prompt's placeholder
        ("So the answer is \\boxed{5", "none:unclosed-box"),
        ("\\boxed{" + "1" * 5000 + "}", "none:unclosed-box"),  # absurdly long: no answer
        ("\\boxed{5} " + "\\boxed{" * 50_000, "none:unclosed-box"),
    ],
)
def test_bad_boxes_are_no_answer(text, path):
    found = extract_math(text)
    assert found.answer is None and found.path == path
    assert TASKS.get("math500").is_correct(found.answer, problem("5")) is False


def test_output_of_megabytes_reads_its_final_box():
    text = "Let me think. " * 300_000 + "x = $2$ and {" * 10_000 + " so \\boxed{42}"
    assert len(text) > 4_000_000
    assert extract_math(text) == ("42", "boxed")
    assert extract_math(text[: -len(" so \\boxed{42}")]).source == "fallback"


def test_gold_the_checker_cannot_parse_matches_itself_only():
    t, gold = TASKS.get("olympiadbench"), problem("m_{\\max }=n^{2}-n-1")
    assert t.is_correct("m_{\\max}=n^{2}-n-1", gold)  # one space less
    assert not t.is_correct("n^2-n", gold)
    assert not t.is_correct("garbage }{ \\frac", gold)


@pytest.mark.parametrize(
    "text, answer, path",
    [
        ("The final answer is $2\\sqrt{3}$.", "2\\sqrt{3}", "statement:answer-is"),
        ("So the answer is 3\\pi.", "3\\pi", "statement:answer-is"),
        ("The answer is **14{,}916**.", "14{,}916", "statement:bold"),
        ("We get \\boxed{255}; the final answer is $10,455$.", "10,455", "statement:final-after-box"),
        ("Answer: $5$, but checking gives \\boxed{7}", "7", "boxed"),
        ("Answer: 7 and later Answer: $5$... so \\boxed{7}", "7", "boxed"),
        ("ratio $\\frac{1+\\sqrt{5}}{2}$", "\\frac{1+\\sqrt{5}}{2}", "fallback:last-span"),
        ("Case AZYUK2A.", None, "none"),
    ],
)
def test_whole_value_and_which_rule(text, answer, path):
    found = extract_math(text)
    assert (found.answer, found.path) == (answer, path)


def test_multi_answer_collects_every_box_single_keeps_the_last():
    text = "So $x=-2$: \\boxed{-2}. Also $x=1$: \\boxed{1}."
    multi = Problem("p", "q", "1, -2", metadata={"is_multiple_answer": True})
    single = Problem("p", "q", "1")
    t = TASKS.get("olympiadbench")
    assert t.extract(text, multi) == ("-2, 1", "boxed") and t.is_correct("-2, 1", multi)
    assert t.extract(text, single) == ("1", "boxed")
    # a list gold makes an item multi-answer without the flag; a tuple or thousands do not
    assert t.extract(text, Problem("p", "q", "-2,1")).answer == "-2, 1"
    assert t.extract(text, Problem("p", "q", "(1, -2)")).answer == "1"
    assert t.extract(text, Problem("p", "q", "1,000")).answer == "1"
    # the thinking before </think> is not the final response
    thought = "<think>maybe \\boxed{3}</think> So \\boxed{-2} and \\boxed{1}."
    assert t.extract(thought, multi).answer == "-2, 1"


def test_multi_answer_last_box_holding_the_list_wins_over_earlier_boxes():
    t = TASKS.get("olympiadbench")
    multi = Problem("p", "q", "-2, 1", metadata={"is_multiple_answer": True})
    text = "The discriminant is \\boxed{9}, so the roots are \\boxed{-2, 1}."
    assert t.extract(text, multi).answer == "-2, 1"


@pytest.mark.parametrize(
    "gold, several",
    [("1,-2", True), ("\\{1\\pm\\sqrt{5},-2\\}", True), ("10,\\!080", False), ("11,\\! 111,\\! 100", False)],
)
def test_list_golds_from_math500(gold, several):
    assert TASKS.get("math500").extract("\\boxed{1} \\boxed{-2}", problem(gold)).answer == (
        "1, -2" if several else "-2"
    )


def test_spaces_matter_where_the_gold_parses():
    t = TASKS.get("math500")
    assert not t.is_correct("1 2", problem("12"))
    assert t.is_correct("\\begin{cases}x", problem("\\begin{cases} x"))  # unparsable: spaces aside


@pytest.mark.parametrize(
    "text, answer",
    [
        ("She has $18 left, so the answer is $18.", "18"),
        ("The answer is $18. Then she spends $5 more.", "18"),  # the "span" between is prose
        ("The answer is $1,000 in total.", "1000"),
        ("The answer is \\$18.", "18"),
        ("The final answer is $14 {, }916$. I hope it is correct.", "14 {, }916"),
        ("The answer is 10,\\!000.", "10,\\!000"),
        ("The final answer is x=5.", "x=5"),
    ],
)
def test_statement_money_and_named_values(text, answer):
    found = extract_math(text)
    assert (found.answer, found.source) == (answer, "statement")
