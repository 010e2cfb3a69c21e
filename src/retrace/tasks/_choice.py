"""Answer extraction for multiple-choice tasks (kind "multiple_choice"): text → letter.

Rules, strongest first; within a rule the LAST match in the text wins, because chain-of-
thought outputs discuss options before committing to one:

1. An explicit answer statement: "Answer: B", "the answer is (C)", "The correct option is
   **D**", "answer: c", "Answer: Option 2", "\\boxed{B}", or the statement naming a
   choice's text ("The answer is Paris."). The "Answer: X" form is the one simple-evals
   asks for and parses, `(?i)Answer[ \\t]*:[ \\t]*\\$?([A-D])\\$?`
   (https://github.com/openai/simple-evals/blob/main/common.py); "the answer is (X)" is
   the form of lm-evaluation-harness's CoT tasks (mmlu flan_cot, bbh; filters in
   https://github.com/EleutherAI/lm-evaluation-harness/blob/main/lm_eval/filters/extraction.py).
2. Without one: a bold letter (**B**), then a final line that starts with a letter marker
   ("B) ...", "(B)", "B."), then "option 2"/"choice B", then a parenthesised "(B)"
   anywhere (lm-eval's MultiChoiceRegexFilter form), then a final line that is exactly
   one choice's text.

Sources (retrace.tasks.base.SOURCES): rule 1 is "boxed" (a \\boxed{B}) or "statement",
rule 2 is "fallback" (not counted by the paper-faithful vote). The prompt's format line
("Answer: X") echoed back names no choice (X is not an option letter) and is skipped.

Guards: a letter counts only as a whole token (never "A" inside "A common mistake ...",
the substring bug of naive `letter in text` checks), only if it names one of the
problem's choices, and a lower-case letter only when bracketed or followed by
punctuation/end of line ("answer: c" yes, "the answer is a bit tricky" no).
Echoed format placeholders are skipped: "Answer: [Provide the answer here] 3" reads the 3
(base.ECHOED_PLACEHOLDER; the DRR prompts' format, paper Appendix B).

Numbers: one convention, the prompt's (`index_base`). The prompts of ChoiceTask
(templates mc_cot.j2) list options by letter, so a number is the option's position counted
from 1 ("Option 2" = B, base 1); the DRR prompts number choices from 0 ("your choice (e.g.,
0, 1, 2, etc)", paper Appendix B; drr/prompts.py), so there "Answer: 2" is C (base 0). The
DRR reply parser reads the same text the same way at base 0 (tests/unit/test_controls.py
holds the shared cases).
Not covered: answers given only in words that paraphrase a choice.
"""

from __future__ import annotations

import re

from retrace.tasks.base import LETTERS, NO_ANSWER, Extraction, Task, after_placeholder, ruled
from retrace.util.records import Problem

LEAD = re.compile(
    r"(?i)\b(?:answer|(?:correct|best|right)\s+(?:option|choice))\b"
    r"(?:\s*(?:is|would\s+be|should\s+be|must\s+be|will\s+be))?\s*[:=\-–]?[ \t]*"
)
TAIL_TOKEN = re.compile(
    r"^[\s*_$\[({]*(?:\\(?:boxed|text|textbf|mathrm)\{)*[\s*_$\[({]*"
    r"(?P<word>(?:option|choice)\s*#?\s*)?(?P<tok>[A-Za-z]|\d{1,2})(?![A-Za-z0-9])"
    r"(?P<close>[\s*_$)\]}]*)(?P<after>.?)",
    re.IGNORECASE | re.DOTALL,
)
BOXED = re.compile(r"\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
BOLD = re.compile(r"\*\*\s*\(?([A-Z])\)?[.):]?(?:\s[^*\n]*)?\*\*")
LINE_MARKER = re.compile(r"^[\s*\[(]*([A-Z])(?:[).:\]*]+(?:\s.*)?|\s*)$")
OPTION_WORD = re.compile(r"(?i)\b(?:option|choice)\s*#?\s*\(?([A-Z]|\d{1,2})\)?(?![A-Za-z0-9])")
PAREN = re.compile(r"\(([A-Z])\)")
SENTENCE_END = ("", "\n", ".", ",", ";", ":", "!", "?")


def _letter(token: str, n: int, guarded: bool, after: str, base: int = 1) -> str | None:
    """The choice letter a token names, if it names one of `n` choices; a number is an index
    counted from `base` (the prompt's numbering, module docstring).

    A lower-case letter or a bare number must be `guarded` (bracketed, or after
    "option") or end its sentence: "answer is a bit" and "answer is 2 apples" are prose.
    """
    if (token.islower() or token.isdigit()) and not guarded and after not in SENTENCE_END:
        return None
    index = int(token) - base if token.isdigit() else LETTERS.index(token.upper())
    return LETTERS[index] if 0 <= index < n else None


def _norm(text: str) -> str:
    return " ".join(text.replace("*", "").lower().split()).rstrip(".!;,")


def _choice_text(tail: str, choices: tuple[str, ...]) -> str | None:
    """The letter of the longest choice whose text starts `tail` (as whole words)."""
    tail = _norm(tail)
    best = None
    for i, choice in enumerate(choices):
        c = _norm(choice)
        if c and (tail == c or tail.startswith(c + " ") or tail.startswith(c + ",")):
            if best is None or len(c) > len(_norm(choices[best])):
                best = i
    return LETTERS[best] if best is not None else None


# The DRR format's second field ("Answer: 2 Rationale: ...", paper Appendix B) ends the answer.
RATIONALE = re.compile(r"(?i)\s*\**rationale\**\s*:.*$")


def _from_tail(tail: str, choices: tuple[str, ...], base: int = 1, named: bool = False) -> str | None:
    """The letter an answer statement's remainder names: text of a choice, else a letter.
    `named`: the statement itself says "option"/"choice" ("the correct option is 2")."""
    line = RATIONALE.sub("", after_placeholder(tail.split("\n", 1)[0][:300])[0])
    by_text = _choice_text(line, choices)
    if by_text:
        return by_text
    m = TAIL_TOKEN.match(line)
    if not m:
        return None
    bracketed = bool(re.search(r"[(\[{]", line[: m.start("tok")])) and any(
        ch in m.group("close") for ch in ")]}"
    )
    guarded = bracketed or named or bool(m.group("word"))
    return _letter(m.group("tok"), len(choices), guarded, m.group("after"), base)


def _statement_rule(lead: str, tail: str) -> str:
    """Which statement form fired, for results.csv's answer_paths."""
    if after_placeholder(tail)[1]:
        return "statement:after-placeholder"
    return "statement:correct-option" if re.search(r"(?i)option|choice", lead) else "statement:answer"


def _explicit(text: str, choices: tuple[str, ...], base: int = 1) -> Extraction:
    found = [
        (m.start(), _from_tail(m.group(1), choices, base), "boxed", "boxed") for m in BOXED.finditer(text)
    ]
    for m in LEAD.finditer(text):
        rule = _statement_rule(m[0], text[m.end() :])
        letter = _from_tail(text[m.end() :], choices, base, rule == "statement:correct-option")
        found.append((m.start(), letter, "statement", rule))
    found = [f for f in found if f[1]]
    return ruled(*max(found)[1:]) if found else NO_ANSWER


FALLBACK_RULES = ("bold", "line-marker", "option-word", "paren")


def _fallback(text: str, choices: tuple[str, ...], base: int = 1) -> tuple[str, str] | None:
    n = len(choices)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    tiers = [
        [m.group(1) for m in BOLD.finditer(text)],
        [m.group(1) for m in [LINE_MARKER.match(last)] if m],
        [m.group(1) for m in OPTION_WORD.finditer(text)],
        [m.group(1) for m in PAREN.finditer(text)],
    ]
    for rule, tier in zip(FALLBACK_RULES, tiers, strict=True):
        letters = [
            x for x in (_letter(t.upper() if not t.isdigit() else t, n, True, "", base) for t in tier) if x
        ]
        if letters:
            return letters[-1], rule
    named = _choice_text(last, choices) if _norm(last) in {_norm(c) for c in choices} else None
    return (named, "choice-text") if named else None


def extract_choice_sourced(text: str, choices: tuple[str, ...], index_base: int = 1) -> Extraction:
    """The letter ("A", "B", ...) a completion commits to, and how it was found; a number
    names the choice at that index counted from `index_base` (the prompt's numbering)."""
    if not text or not choices:
        return NO_ANSWER
    explicit = _explicit(text, choices, index_base)
    if explicit.answer:
        return explicit
    guess = _fallback(text, choices, index_base)
    return ruled(guess[0], "fallback", f"fallback:{guess[1]}") if guess else NO_ANSWER


def extract_choice(text: str, choices: tuple[str, ...], index_base: int = 1) -> str | None:
    """The letter ("A", "B", ...) a completion commits to, or None."""
    return extract_choice_sourced(text, choices, index_base).answer


class ChoiceTask(Task):
    """Multiple choice: gold and answers are letters; correct means the same letter."""

    kind = "multiple_choice"
    default_template = "mc_cot.j2"
    index_base = 1  # mc_cot.j2 lists options by letter: "Option 2" is the second (docstring)

    def extract(self, text: str, problem: Problem) -> Extraction:
        return extract_choice_sourced(text, problem.choices or (), self.index_base)

    def is_correct(self, answer: str | None, problem: Problem) -> bool:
        return answer is not None and answer.strip().upper() == problem.gold.upper()

    def same_answer(self, a: str, b: str) -> bool:
        return a.strip().upper() == b.strip().upper()
