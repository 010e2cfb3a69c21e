"""Answer extraction and equivalence for open-ended maths tasks (kind "math").

Extraction (`extract_math`, an Extraction(answer, source) whose `path` names the rule) takes,
in order (docs/scoring.md states each convention with its source):
- "boxed": the last complete `\\boxed{...}` (or `\\fbox{...}`) that is not the prompt's
  empty format placeholder (`\\boxed{}` echoed from "put your final answer within \\boxed{}");
  on a multi-answer item (`wants_several`) every distinct box of the final response, joined
  into one comma list that math-verify compares as a set ("boxed:every-box");
- "statement" instead of that box when a "final answer is X" statement comes after it
  (Math-Verify's rightmost-wins rule; "statement:final-after-box");
- "none" when a box opens after it and never closes (the output stopped mid-answer: a
  truncated "\\boxed{3" of "\\boxed{36}" is no answer) or holds over MAX_BOX characters;
- "statement": the last GSM8K-style `#### x`, else the last "the (final) answer is x" /
  "Answer: x", also in bold ("**42**") or after an echoed format placeholder ("Answer:
  [Provide the answer here] 3"); its value is whole: a `$...$` span entire, a plain number
  with the LaTeX glued to it ("2\\sqrt{3}", never 2);
- "fallback": the last math span or standalone number (lm-eval's flexible-extract, Math-
  Verify's unanchored LaTeX), which the paper-faithful vote does not count: in "The solution
  is correct." after a restated question it is noise;
- "none": nothing.
Equivalence is math-verify's (https://github.com/huggingface/Math-Verify), not a
hand-written normaliser, after dropping a percent sign or word (PERCENT) and joining
space-separated thousands (SPACE_THOUSANDS), reading a bare-name `label = value` as its
value (NAME); a gold math-verify cannot parse is compared as text, whitespace aside.

Not covered: answers a model states only in words ("twelve").
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

from retrace.tasks.base import NO_ANSWER, Extraction, Task, ruled
from retrace.util.records import Problem

# GSM8K's own answer marker and clean-up: "#### 1,234" → "1234".
# https://github.com/openai/grade-school-math/blob/master/grade_school_math/dataset.py
# (ANS_RE = r"#### (\-?[0-9\.\,]+)", then .replace(",", "")).
GSM8K_ANSWER = re.compile(r"####\s*\$?\s*(-?[0-9.,]+)")
# The "flexible-extract" fallback of lm-evaluation-harness's gsm8k task takes the last
# number in the output (group_select: -1):
# https://github.com/EleutherAI/lm-evaluation-harness/blob/main/lm_eval/tasks/gsm8k/gsm8k.yaml
# Ours only treats a comma as a thousands separator when it is one ("1,000", not "1,2"), and
# a number after a letter ("AZYUK2A", "x2") is no number (Math-Verify tests/test_all.py
# test_number_extraction: ("2", "AZYUK2A", 0)); a unit may follow it ("1,000.99m²").
NUMBER = re.compile(r"(?<![\w.])-?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:/\d+)?(?!\d)")
THOUSANDS_AFTER = re.compile(r"(?:\\!)?\s*\d{3}(?!\d)")  # what follows a thousands comma
THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
BRACE = re.compile(r"[{}]")
# A box whose content runs longer than this is no answer (a runaway "\\boxed{" that swallowed
# the rest of a degenerate output); statements and the fallback read at most this much of a
# value, and the fallback only the output's last FALLBACK_WINDOW characters (the end is where
# an answer is; it also bounds the work on an output of megabytes).
MAX_BOX = 4000
FALLBACK_WINDOW = 8000
# "The answer is 42", "final answer: $-3.5$", "Answer: 1,200" (the statement forms of
# lm-eval's gsm8k "strict-match" ("The answer is (\-?[0-9\.\,]+).") and of simple-evals'
# "Answer:" lines). Two forms of chat models are statements too (issue 31): the value in
# markdown bold ("The answer is **42**.", how chat-tuned models such as Qwen2.5 mark a final
# answer), and the value after the prompt's echoed format placeholder ("Answer: [Provide the
# answer here] 3", base.ECHOED_PLACEHOLDER). The value itself is read by `_statement_value`.
STATEMENT = re.compile(
    r"(?i)\banswer\s*(?:is|:|=)\s*:?[ \t]*"
    r"(?P<placeholder>\[[^\]\n]*\b(?:provide|your|answer|here)\b[^\]\n]*\]\s*|<[^<>\n]*>\s*)?"
    r"(?P<bold>\*\*)?[ \t]*"
)
FINAL = re.compile(r"(?i)final\s+$")
# A plain (not $-delimited) value: a number, with whatever LaTeX is glued to it ("2\\sqrt{3}",
# "3\\pi", "2^{10}", "14{,}916", "10,\\!000"), up to a space or sentence punctuation, so the
# answer is never a shorter number cut out of a longer value (issue 53).
PLAIN_VALUE = re.compile(
    r"(?:[A-Za-z](?:_\{?\w+\}?)?\s*=\s*)?"  # "x = 5", "a_1=3": math-verify compares the value
    r"-?(?:\d|\\(?:d|t)?frac|\\sqrt|\\pi)(?:\\!|[^\s.,;:!?*$]|[.,;:](?=[^\s*$]))*"
)
CURRENCY = re.compile(r"\\?\$\s*(?=-?\d)")
# Two words in a row outside LaTeX commands: a "$...$" that is prose between two amounts of money.
PROSE = re.compile(r"(?<![\\\w])[A-Za-z]{2,}\s+[A-Za-z]{2,}\b")
# Math spans, as Math-Verify's `make_latex_env_pattern` (src/math_verify/parser.py) finds
# them: $$...$$, \\[...\\], $...$ (one line, not after a digit: "2$" is money), \\(...\\).
MATH_SPAN = re.compile(
    r"(?<!\\)\$\$(?P<dd>(?:[^$]|\$(?!\$))+?)(?<!\\)\$\$"
    r"|(?<!\\)\\\[(?P<db>(?:[^\\]|\\(?!\]))+?)(?<!\\)\\\]"
    r"|(?<![\\\d])\$(?P<d>(?:\\[$]|[^\n$])+?)(?<!\\)\$"
    r"|(?<!\\)\\\((?P<p>(?:[^\\\n]|\\(?!\)))+?)(?<!\\)\\\)",
    re.DOTALL,
)
# Percent as a sign or a word is dropped, so "25\\%", "25%" and "25 percent" equal a gold "25":
# Hendrycks MATH's `_strip_string` removes "\\%" (https://github.com/hendrycks/math,
# modeling/math_equivalence.py, "remove percentage"); Math-Verify reads the words "percent",
# "percentage" and "pct" as the sign (src/math_verify/parser.py, percent_re_group).
PERCENT = re.compile(r"\s*(?:\\?%|\\text\{\s*\\?%\s*\}|\b(?:percent(?:age)?|pct))\s*$", re.IGNORECASE)
# Thousands separated by a space or a LaTeX thin/normal space ("1 000", "1\\,000", "1\\ 000"):
# without this math-verify reads "1 000" as the product 1*000 = 0. Only groups of exactly
# three digits count, so "2 3" stays two numbers.
SPACE_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?:(?: |\\,|\\ |~)\d{3})+)(?![\d])")
# A bare "\\frac{10}{9}" outside any span is one value (Math-Verify's latexFraction pattern).
FRACTION = r"-?\\[dt]?frac\{-?\d+(?:\.\d+)?\}\{-?\d+(?:\.\d+)?\}"
# The left side of a `name = value` answer: a letter with sub/superscripts and LaTeX names.
NAME = re.compile(r"^\s*\\?[A-Za-z]+(?:\s*[_^]\s*(?:\{[^{}=]*\}|\w))*\s*$")
FALLBACK = re.compile(
    rf"(?P<span>{MATH_SPAN.pattern})|(?P<frac>{FRACTION})|(?P<num>{NUMBER.pattern})", re.DOTALL
)


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} with balanced braces, as in Hendrycks MATH's
    `last_boxed_only_string` (https://github.com/hendrycks/math, modeling/math_equivalence.py
    and modeling/dataset/util.py)."""
    found = [content for _, _, content in _boxes(text) if content is not None]
    return found[-1] if found else None


def _boxes(text: str) -> list[tuple[int, int, str | None]]:
    """(start, end, stripped content) of every box; content None when the box never closes
    or holds more than MAX_BOX characters (no answer either way)."""
    closes = _matching_braces(text)
    out: list[tuple[int, int, str | None]] = []
    for match in BOX_OPEN.finditer(text):
        open_at = match.end() - 1
        close = closes.get(open_at)
        if close is None or close - open_at > MAX_BOX:
            out.append((match.start(), len(text) if close is None else close + 1, None))
        else:
            out.append((match.start(), close + 1, text[open_at + 1 : close].strip()))
    return out


def _matching_braces(text: str) -> dict[int, int]:
    """{position of "{": position of its "}"} in one pass (linear even in a degenerate
    output of megabytes of unclosed boxes)."""
    stack: list[int] = []
    pairs = {}
    for m in BRACE.finditer(text):
        if m[0] == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def _span_content(m: re.Match) -> str:
    """The inside of a MATH_SPAN match (whichever delimiter matched)."""
    return next(m[k] for k in ("dd", "db", "d", "p") if m[k] is not None).strip()


def _statement_value(tail: str) -> str | None:
    """The whole value a statement's remainder `tail` gives: a math span at its start whole
    ("$2\\sqrt{3}$", not 2), else a plain value (PLAIN_VALUE, after a currency "$": in "the
    answer is $18. Then she spends $5." the "span" is prose, the answer 18); None for a box
    (the box rule reads it) or anything else ("the answer is correct")."""
    tail = tail.lstrip()
    span = MATH_SPAN.match(tail)
    if span and not PROSE.search(_span_content(span)):
        value = _span_content(span)
        return None if BOX_OPEN.search(value) else value.rstrip(".").strip() or None
    money = CURRENCY.match(tail)
    plain = PLAIN_VALUE.match(tail, money.end() if money else 0)
    return _plain(plain[0]) if plain else None


def _plain(value: str) -> str:
    value = value.rstrip("*")
    return value.replace(",", "") if THOUSANDS.match(value) else value


def _last_statement(text: str, start: int = 0, final: bool = False) -> tuple[str, str] | None:
    """(value, rule) of the last answer statement from `start` on that has a value (and says
    "final answer" where `final`); values are read from the end back, so an output that
    repeats "The answer is 5." for megabytes costs one read."""
    for m in reversed(list(STATEMENT.finditer(text, start))):
        if final and not FINAL.search(text, max(0, m.start() - 12), m.start()):
            continue
        value = _statement_value(text[m.end() : m.end() + MAX_BOX])
        if value is not None:
            return value, "after-placeholder" if m["placeholder"] else "bold" if m["bold"] else "answer-is"
    return None


def _fallback(text: str) -> Extraction:
    """The last math span or standalone number, whichever comes later (a number inside a span
    is read with its span: "$\\frac{1+\\sqrt{5}}{2}$" is not 2)."""
    # Spans come first in the alternation, so they swallow the numbers inside them.
    found = next(reversed(list(FALLBACK.finditer(text[-FALLBACK_WINDOW:]))), None)
    if found is None:
        return NO_ANSWER
    if found["span"] is not None:
        return ruled(_span_content(found), "fallback", "fallback:last-span")
    if found["frac"] is not None:
        return ruled(found["frac"], "fallback", "fallback:last-number")
    value = found["num"]
    return ruled(
        value.replace(",", "") if THOUSANDS.match(value) else value, "fallback", "fallback:last-number"
    )


def _final_response(text: str) -> str:
    """The text after a reasoning model's closing </think>, where its answer is (all of it
    when there is none)."""
    head, sep, tail = text.rpartition("</think>")
    return tail if sep and tail.strip() else text


def extract_math(text: str, multiple: bool = False) -> Extraction:
    """The final answer of a maths completion and how it was found (module docstring);
    `multiple`: the item asks for several answers, and every box of the final response is
    collected into one comma list (a set answer)."""
    if not text:
        return NO_ANSWER
    boxes = [b for b in _boxes(text) if b[2] != ""]  # "\\boxed{}": the format placeholder
    if boxes:
        start, end, content = boxes[-1]
        if content is None:  # an unclosed box after every closed one: cut off mid-answer
            return ruled(None, "none", "none:unclosed-box")
        later = _last_statement(text, end, final=True)
        if later:  # "The final answer is X" after the last box wins, as in Math-Verify
            return ruled(later[0], "statement", "statement:final-after-box")
        if multiple and not is_list(content):  # a last box holding the whole list is the answer
            found = list(dict.fromkeys(c for _, _, c in _boxes(_final_response(text)) if c))
            if len(found) > 1:
                return ruled(", ".join(found), "boxed", "boxed:every-box")
        return Extraction(content, "boxed")
    marks = GSM8K_ANSWER.findall(text)
    if marks and marks[-1].replace(",", "").rstrip("."):
        return ruled(marks[-1].replace(",", "").rstrip("."), "statement", "statement:####")
    stated = _last_statement(text)
    if stated:
        return ruled(stated[0], "statement", f"statement:{stated[1]}")
    return _fallback(text)


def extract_math_answer(text: str) -> str | None:
    """The final answer string of a maths completion (any source), or None if there is none."""
    return extract_math(text).answer


def _timeout() -> int | None:
    # math-verify's timeout uses SIGALRM, which only works in the main thread;
    # elsewhere we run without one rather than crash.
    return 5 if threading.current_thread() is threading.main_thread() else None


@lru_cache(maxsize=65536)
def parsed(answer: str) -> tuple:
    """math-verify's parse of an answer string, read as the content of a \\boxed{}."""
    from math_verify import parse  # deferred: pulls in sympy and antlr

    # Boxing makes math-verify read the whole string as one LaTeX answer instead of
    # picking the first number out of it ("\\left( 3, \\frac{\\pi}{2} \\right)" → 3).
    # A sentence-final "." (OlympiadBench gold "(-\\infty, 0) \\cup\\{1\\}.") makes
    # math-verify fall back to the first number; it is never part of a maths answer.
    answer = PERCENT.sub("", answer.strip().rstrip(".").rstrip())
    answer = SPACE_THOUSANDS.sub(lambda m: m[1] + re.sub(r"\D", "", m[2]), answer)
    found = tuple(parse(f"\\boxed{{{answer}}}", parsing_timeout=_timeout()))
    name, eq, value = answer.partition("=")
    if eq and "=" not in value and NAME.match(name) and not _relation(found):
        # "m_{\\max} = n^2-n-1": math-verify reads "x = v" as an equation and compares its
        # value, but a name it cannot parse derails it (that one parses as 1); a bare name
        # (no operators) is only a label, so read v.
        return parsed(value)
    return found


def _relation(found: tuple) -> bool:
    """Whether math-verify read an answer as an equation or inequality (a sympy Relational)."""
    from sympy.core.relational import Relational

    return any(isinstance(x, Relational) for x in found)


@lru_cache(maxsize=65536)
def equivalent(gold: str, answer: str) -> bool:
    """math-verify equivalence; argument order matters (gold first, as in `verify`). Cached:
    votes and Maj@k compare the same few answer strings over and over (a Maj@N' job of
    hundreds of samples per question spent minutes in sympy re-deciding one pair)."""
    if gold.strip() == answer.strip():
        return True
    g, a = parsed(gold), parsed(answer)
    if not g or not a:
        return False
    if all(isinstance(x, str) for x in g):  # a gold math-verify cannot parse: text, spaces aside
        return "".join(gold.split()) == "".join(answer.split())
    from math_verify import verify

    return bool(verify(list(g), list(a), timeout_seconds=_timeout()))


def unparsable(problems: list[Problem]) -> list[Problem]:
    """The problems whose gold math-verify cannot parse (it then compares it as text only;
    `retrace plan --check` lists them, retrace.planning.preflight)."""
    return [p for p in problems if all(isinstance(x, str) for x in parsed(p.gold))]


def wants_several(problem: Problem) -> bool:
    """Whether an item asks for several answers: the dataset flags it (OlympiadBench's
    `is_multiple_answer`), or its gold is a list (`is_list`)."""
    return bool(problem.metadata.get("is_multiple_answer")) or is_list(problem.gold)


def is_list(value: str) -> bool:
    """A comma outside any brackets ("-2, 1", a set "\\{1, 2\\}"), not a tuple
    "(3, \\frac{\\pi}{2})" nor thousands ("1,000", "10,\\!080", "11,\\! 111")."""
    value = re.sub(r"^\\?\{(.*)\\?\}$", r"\1", value.strip())
    depth = 0
    for i, ch in enumerate(value):
        depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
        if ch == "," and depth == 0 and not THOUSANDS_AFTER.match(value, i + 1):
            return True
    return False


class MathTask(Task):
    """Open-ended maths: boxed answers judged by math-verify."""

    kind = "math"
    default_template = "math_cot.j2"

    def extract(self, text: str, problem: Problem) -> Extraction:
        return extract_math(text, multiple=wants_several(problem))

    def is_correct(self, answer: str | None, problem: Problem) -> bool:
        return answer is not None and equivalent(problem.gold, answer)

    def same_answer(self, a: str, b: str) -> bool:
        # Both directions, so that voting clusters do not depend on which came first.
        return equivalent(a, b) and equivalent(b, a)
