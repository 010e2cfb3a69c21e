"""Answer extraction and matching for free-text tasks judged by exact string match (kind "exact").

BIG-bench's `exact_str_match` counts a response correct when it equals one of the
targets (https://github.com/google/BIG-bench/blob/main/bigbench/api/task_metrics.py,
`exact_str_match_fn`), after `postprocess_output` keeps the first match of the task's
`output_regex` (bigbench/api/json_task.py). Our outputs are chat chain-of-thought rather
than short continuations, so we first take the answer statement ("Answer: ..."), apply
`output_regex` to it if the task has one, and compare after normalising case and
whitespace and dropping trailing punctuation; that normalisation is ours, not BIG-bench's.
An "Answer: ..." statement is source "statement", the last line "fallback"
(retrace.tasks.base.SOURCES). A statement that echoes the prompt's format placeholder
("Answer: <your answer>", from templates/exact_cot.j2) is not an answer and is skipped.
"""

from __future__ import annotations

import re

from retrace.tasks.base import NO_ANSWER, Extraction, Task
from retrace.util.records import Problem

# "Answer: x" / "the answer is x" up to the end of the line; "is" or ":" is required so
# prose such as "the answer depends on ..." is not taken for a statement.
ANSWER_LINE = re.compile(r"(?im)\banswer\s*(?:is\b\s*:?|[:=])[ \t]*\**[ \t]*(.+?)\**[ \t]*$")


PLACEHOLDER = re.compile(r"^\s*(?:<[^<>]*>|your answer|\[your answer\])\s*$", re.IGNORECASE)


def normalise(text: str) -> str:
    """Lower case, single spaces, no surrounding quotes/markdown or final punctuation."""
    text = " ".join(text.lower().split())
    return text.strip("*`\"' ").rstrip(".!;,").strip()


def _echo(line: str) -> bool:
    """A line that only restates the format instruction ("Answer: <your answer>")."""
    m = ANSWER_LINE.search(line)
    return bool(m and PLACEHOLDER.match(m.group(1)))


def extract_exact_sourced(text: str, output_regex: str | None = None) -> Extraction:
    """The last "Answer: ..." statement's content (else the last non-empty line),
    narrowed by `output_regex` (its first match, as BIG-bench does) when given."""
    if not text or not text.strip():
        return NO_ANSWER
    statements = [st for st in ANSWER_LINE.findall(text) if not PLACEHOLDER.match(st)]
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not _echo(ln)]
    if not statements and not lines:
        return NO_ANSWER
    answer, source = (statements[-1], "statement") if statements else (lines[-1], "fallback")
    if output_regex:
        matches = re.findall(output_regex, answer)
        answer = matches[0] if matches else ""
    answer = answer.strip()
    return Extraction(answer, source) if answer else NO_ANSWER


class ExactTask(Task):
    """Free-text answers; gold plus any alternatives in `metadata["targets"]`."""

    kind = "exact"
    default_template = "exact_cot.j2"

    def extract(self, text: str, problem: Problem) -> Extraction:
        return extract_exact_sourced(text, problem.metadata.get("output_regex"))

    def is_correct(self, answer: str | None, problem: Problem) -> bool:
        if answer is None:
            return False
        targets = problem.metadata.get("targets") or [problem.gold]
        return normalise(answer) in {normalise(t) for t in targets}

    def same_answer(self, a: str, b: str) -> bool:
        return normalise(a) == normalise(b)
