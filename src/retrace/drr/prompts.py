"""Appendix B prompts as chat messages, and parsing of the reasoner's replies.

    msgs = turn_messages(problem, context, turn=0, strategy="exploration")
    answer, rationale = split_reply("Answer: 1 Rationale: Jupiter is the largest.")
    letter = answer_letter("1", problem.choices)       # "B"; None if unparseable
    is_abstention("none of the above")                 # True

Prompt wording lives in prompts/drr/*.j2. Choices are numbered from 0 because the paper's
prompts ask for "your choice (e.g., 0, 1, 2, etc)" (Appendix B); an answer is read as that
0-based index, else as a bare choice letter, else as a choice's text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from retrace.tasks._choice import extract_choice
from retrace.tasks.base import LETTERS, after_placeholder
from retrace.util.records import Message, Problem
from retrace.util.templates import render

INDEX_BASE = 0  # the prompts number choices from 0 (Appendix B: "e.g., 0, 1, 2, etc")

NOTA = "none of the above"  # the Abstain prompt's abstention answer (Appendix B)
# The paper's output format "Answer: [...] Rationale: [...]" (Appendix B); models often put
# them on separate lines or in markdown bold, hence the tolerance for * and whitespace.
REPLY = re.compile(
    r"(?is)\**answer\**\s*:\**\s*(?P<answer>.*?)\s*(?:\**rationale\**\s*:\**\s*(?P<rationale>.*))?$"
)
# Self-Critic asks for "a single number ... in the form (answer)" (Appendix B, after Huang et al.)
PAREN_NUMBER = re.compile(r"\((\d{1,2})\)")


def question_text(problem: Problem) -> str:
    """The question with its 0-numbered choices (also the DM's "Question" field)."""
    return render("drr/question.j2", question=problem.question, choices=list(problem.choices or ()))


def system_prompt(turn: int, strategy: str) -> str:
    if strategy == "exploration":  # turn 1 mimics zero-shot; later turns explore (Appendix B)
        return render("drr/standard_qa.j2" if turn == 0 else "drr/exploration.j2")
    if strategy == "gradual":  # "All turns use the Standard QA Prompt as a system prefix"
        return render("drr/standard_qa_gpt.j2")
    raise ValueError(f"unknown strategy {strategy!r} (exploration | gradual)")


def render_context(context: Sequence[Mapping], strategy: str = "exploration") -> str:
    """Past attempts as Appendix B's environment messages, the feedback after each attempt
    (prompts/drr/env_<strategy>.j2: "exploration" is the Llama3 wording with "Wrong Answer!",
    "gradual" the GPT-4 numbered wording with its "Env:" nudge). The one renderer of the
    feedback message: the reasoner's re-prompts, the DM input and the leak check's trusted
    echoes all print past attempts through it."""
    if strategy not in ("exploration", "gradual"):
        raise ValueError(f"unknown prompt strategy {strategy!r} (exploration | gradual)")
    if not context:
        return ""
    return render(
        f"drr/env_{strategy}.j2",
        context=[{"answer": c["answer"], "rationale": c["rationale"]} for c in context],
    )


def turn_messages(
    problem: Problem, context: Sequence[Mapping], turn: int, strategy: str
) -> tuple[Message, ...]:
    """System prefix + user message (question, then the past attempts' environment messages)."""
    user = question_text(problem)
    env = render_context(context, strategy)
    return (
        Message("system", system_prompt(turn, strategy)),
        Message("user", f"{user}\n\n{env}" if env else user),
    )


def abstain_messages(problem: Problem) -> tuple[Message, ...]:
    return (Message("system", render("drr/abstain_qa.j2")), Message("user", question_text(problem)))


def selfcritic_messages(problem: Problem, replies: Sequence[str]) -> tuple[Message, ...]:
    """Huang et al.'s three turns: answer, review, improve; `replies` are the model's so far."""
    users = [
        render("drr/selfcritic_answer.j2", question=problem.question, choices=list(problem.choices or ())),
        render("drr/selfcritic_review.j2"),
        render("drr/selfcritic_improve.j2"),
    ]
    msgs = [Message("user", users[0])]
    for i, reply in enumerate(replies):
        msgs += [Message("assistant", reply), Message("user", users[i + 1])]
    return tuple(msgs)


# Without the requested format (small models drift): the rest of the line after "the answer
# is" (lm-eval's CoT answer form, see tasks/_choice.py), else a first line that opens with a
# choice number ("2. Dolphin").
LOOSE = (
    re.compile(r"(?i)\banswer\s+(?:is|would\s+be)\s*:?[ \t]*([^\n]+)"),
    re.compile(r"^\s*(\(?\d{1,2}[.)][ \t][^\n]*)"),
)


def split_reply(text: str) -> tuple[str, str]:
    """(answer, rationale) from "Answer: ... Rationale: ..."; without the format, the number a
    loose answer statement names (else "") and the whole text as rationale."""
    m = REPLY.search(text.strip())
    if not m:
        found = [x.group(1).strip().rstrip(".") for pat in LOOSE for x in pat.finditer(text.strip())]
        return (found[0][:200] if found else ""), text.strip()
    # "Answer: [Provide the answer here] 3": the prompt's placeholder echoed before the answer
    answer = after_placeholder(m.group("answer").strip())[0].strip().strip("*[]").strip()
    return answer.split("\n", 1)[0].strip()[:200], (m.group("rationale") or "").strip()


def is_abstention(answer: str) -> bool:
    return NOTA in answer.lower()


def _choice_named(text: str, choices: Sequence[str]) -> int | None:
    """Index of the choice `text` is (or starts with, as whole words); the longest wins."""
    low = text.lower().strip(" .*")
    hits = [i for i, c in enumerate(choices) if c and (low == c.lower() or low.startswith(c.lower() + " "))]
    return max(hits, key=lambda i: len(choices[i])) if hits else None


def answer_letter(answer: str, choices: Sequence[str]) -> str | None:
    """The choice letter an answer field names: a 0-based index ("2"), a choice's text
    ("366", "Paris"), "index. text" (the text wins when they disagree: small models misnumber
    options, e.g. "1. Shark" for choice 0), a bare letter, or a text ending in a choice."""
    a = answer.strip().strip("*[]").strip()
    if not a or is_abstention(a):
        return None
    if a.isdigit() and int(a) < len(choices):  # the prompt asks for the index: it wins
        return LETTERS[int(a)]
    named = _choice_named(a, choices)
    if named is not None:
        return LETTERS[named]
    m = re.match(r"^\(?(?:option|choice)?\s*#?\s*(\d{1,2})(?!\d)\)?\s*[.):\-]?\s*(.*)$", a, re.I | re.S)
    if m:
        by_text = _choice_named(m.group(2), choices) if m.group(2) else None
        if by_text is not None:
            return LETTERS[by_text]
        i = int(m.group(1))
        return LETTERS[i] if i < len(choices) else None
    m = re.match(r"^\(?([A-Z])(?![A-Za-z])", a)
    if m and m.group(1) in LETTERS[: len(choices)]:
        return m.group(1)
    low = a.lower().rstrip(".")
    for i, c in enumerate(choices):
        if low.endswith(" " + c.lower()):
            return LETTERS[i]
    return None


def reply_letter(text: str, choices: Sequence[str]) -> str | None:
    """The choice letter of a whole reply: its answer field (answer_letter), else what the
    shared multiple-choice extraction (tasks/_choice.py) reads at this prompt's 0-based
    numbering ("The correct option is 2 because ..."); None for an abstention."""
    answer, _ = split_reply(text)
    if is_abstention(answer):
        return None
    return (answer_letter(answer, choices) if answer else None) or extract_choice(
        text, tuple(choices), INDEX_BASE
    )


def selfcritic_letter(text: str, choices: Sequence[str]) -> str | None:
    """The last "(N)" in a self-critic reply, N 0-based; else the "Answer:" field if any."""
    found = [int(x) for x in PAREN_NUMBER.findall(text) if int(x) < len(choices)]
    if found:
        return LETTERS[found[-1]]
    answer, _ = split_reply(text)
    return answer_letter(answer, choices) if answer else None
