"""Answer extraction and equivalence for open-ended maths tasks (kind "math").

Extraction (`extract_math`, an Extraction(answer, source)) takes, in order:
- "boxed": the last complete `\\boxed{...}` (or `\\fbox{...}`) that is not the prompt's
  empty format placeholder (`\\boxed{}` echoed from "put your final answer within \\boxed{}");
- "none" when a box opens after it and never closes: the output stopped (finish_reason
  "length") while writing its answer, and a truncated "\\boxed{3" of "\\boxed{36}" is no answer;
- "statement": the last GSM8K-style `#### x`, else the last "the (final) answer is x" /
  "Answer: x" whose value is a number, also in bold ("**42**") or after an echoed format
  placeholder ("Answer: [Provide the answer here] 3");
- "fallback": the last number anywhere (lm-eval's flexible-extract), which the paper-faithful
  vote does not count: in "The solution is correct." after a restated question it is noise;
- "none": nothing.
Equivalence is math-verify's (https://github.com/huggingface/Math-Verify), not a
hand-written normaliser, after dropping a percent sign as Hendrycks MATH's `_strip_string`
does (https://github.com/hendrycks/math, modeling/math_equivalence.py: "remove percentage",
`string.replace("\\%", "")`): "25\\%" and "25%" equal a gold "25".

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
# Ours only treats a comma as a thousands separator when it is one ("1,000", not "1,2").
NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?")
BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "The answer is 42", "final answer: $-3.5$", "Answer: 1,200" (the statement forms of
# lm-eval's gsm8k "strict-match" ("The answer is (\-?[0-9\.\,]+).") and of simple-evals'
# "Answer:" lines), the value a number. Two forms of chat models are statements too (issue 31):
# the value in markdown bold ("The answer is **42**.", how chat-tuned models such as Qwen2.5
# mark a final answer), and the value after the prompt's echoed format placeholder
# ("Answer: [Provide the answer here] 3", base.ECHOED_PLACEHOLDER).
STATEMENT = re.compile(
    r"(?i)\banswer\s*(?:is|:|=)\s*:?\s*"
    r"(?P<placeholder>\[[^\]\n]*\b(?:provide|your|answer|here)\b[^\]\n]*\]\s*|<[^<>\n]*>\s*)?"
    r"(?P<bold>\*\*)?\s*\$?\s*(?P<value>-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?)"
)
PERCENT = re.compile(r"\s*\\?%\s*$")


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} with balanced braces, as in Hendrycks MATH's
    `last_boxed_only_string` (https://github.com/hendrycks/math, modeling/math_equivalence.py
    and modeling/dataset/util.py)."""
    found = [content for _, content in _boxes(text) if content is not None]
    return found[-1] if found else None


def _boxes(text: str) -> list[tuple[int, str | None]]:
    """(position, stripped content or None when the box never closes) of every box."""
    out = []
    for match in BOX_OPEN.finditer(text):
        content = _balanced_group(text, match.end() - 1)
        out.append((match.start(), None if content is None else content.strip()))
    return out


def _balanced_group(text: str, open_at: int) -> str | None:
    """The text inside the {...} group opening at `open_at`, or None if it never closes."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1 : i]
    return None


def extract_math(text: str) -> Extraction:
    """The final answer of a maths completion and how it was found (module docstring)."""
    if not text:
        return NO_ANSWER
    boxes = [(at, c) for at, c in _boxes(text) if c != ""]  # "\\boxed{}": the format placeholder
    if boxes:
        at, content = boxes[-1]
        if content is None:  # an unclosed box after every closed one: cut off mid-answer
            return NO_ANSWER
        return Extraction(content, "boxed")
    marks = GSM8K_ANSWER.findall(text)
    if marks and marks[-1].replace(",", "").rstrip("."):
        return ruled(marks[-1].replace(",", "").rstrip("."), "statement", "statement:####")
    stated = list(STATEMENT.finditer(text))
    if stated:
        m = stated[-1]
        rule = "after-placeholder" if m["placeholder"] else "bold" if m["bold"] else "answer-is"
        return ruled(m["value"].replace(",", ""), "statement", f"statement:{rule}")
    numbers = NUMBER.findall(text)
    return ruled(numbers[-1].replace(",", ""), "fallback", "fallback:last-number") if numbers else NO_ANSWER


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
    return tuple(parse(f"\\boxed{{{answer}}}", parsing_timeout=_timeout()))


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
    from math_verify import verify

    return bool(verify(list(g), list(a), timeout_seconds=_timeout()))


class MathTask(Task):
    """Open-ended maths: boxed answers judged by math-verify."""

    kind = "math"
    default_template = "math_cot.j2"

    def extract(self, text: str, problem: Problem) -> Extraction:
        return extract_math(text)

    def is_correct(self, answer: str | None, problem: Problem) -> bool:
        return answer is not None and equivalent(problem.gold, answer)

    def same_answer(self, a: str, b: str) -> bool:
        # Both directions, so that voting clusters do not depend on which came first.
        return equivalent(a, b) and equivalent(b, a)
