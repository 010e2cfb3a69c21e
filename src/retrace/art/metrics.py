"""Scoring ART answers with each task's own metric; never substring matching.

    from retrace.art.metrics import grade
    grade(task, problem, "(B) No")   # -> (True/False, "B")  multiple choice
    grade(task, problem, "73")       # -> (True/False, "73") exact string match

- BIG-bench `exact_str_match` (bigbench/api/task_metrics.py, `exact_str_match_fn`): the
  answer, narrowed by the task's `output_regex` as `postprocess_output` does
  (bigbench/api/json_task.py), must equal one of the targets; we compare after the
  normalisation of retrace.tasks._exact.normalise (case, spaces, final punctuation).
- BIG-bench `multiple_choice_grade` and MMLU accuracy: BIG-bench grades the highest-scoring
  choice (log-likelihood ranking); ART generates an answer instead, so the `Ans:` must name
  exactly one choice, either by being exactly one choice's text after normalisation or by a
  leading letter marker ("B", "(B)", "B)", "B.", "(B) No"); it is correct when that choice
  is the gold one. An answer naming no choice is wrong. The released ART code instead asked
  whether the gold string occurs anywhere in the output, so "A" matched every MMLU item
  whose gold was A regardless of what the model said; `test_art_metrics.py` guards that.
"""

from __future__ import annotations

import re

from retrace.tasks._exact import normalise
from retrace.tasks.base import LETTERS
from retrace.util.records import Problem

# "(B)", "(B) No", "B)", "B.", "B:" or a bare "B"; not "A cat" (a choice text may start so).
_MARKER = re.compile(r"^\s*(?:\(([A-Z])\)|([A-Z])(?:[.):]|\s*$))")


def choice_of(answer: str | None, problem: Problem) -> str | None:
    """The letter of the one choice `answer` names, or None."""
    if answer is None or not problem.choices:
        return None
    texts = [normalise(c) for c in problem.choices]
    hits = [i for i, t in enumerate(texts) if t == normalise(answer)]
    if len(hits) == 1:
        return LETTERS[hits[0]]
    m = _MARKER.match(answer)
    letter = m and (m.group(1) or m.group(2))
    return letter if letter and LETTERS.index(letter) < len(texts) else None


def grade(task, problem: Problem, answer: str | None) -> tuple[bool, str | None]:
    """(correct, the answer as scored) under the task's own metric."""
    if task.kind == "multiple_choice":
        letter = choice_of(answer, problem)
        return letter is not None and letter == problem.gold, letter
    if answer is None:
        return False, None
    narrowed = task.extract_answer(answer, problem)
    return bool(task.is_correct(narrowed, problem)), narrowed


def format_input(problem: Problem) -> str:
    """The question, and for multiple choice its options as "(A) …" lines (the library's form)."""
    if not problem.choices:
        return problem.question.strip()
    opts = "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(problem.choices))
    return f"{problem.question.strip()}\n{opts}"


def gold_answer(problem: Problem) -> str:
    """The gold answer as a demonstration writes it ("(B) No" or the first target)."""
    if problem.choices:
        i = LETTERS.index(problem.gold)
        return f"({problem.gold}) {problem.choices[i]}"
    return problem.gold


def vote(answers: list[str | None], key=lambda a: a) -> str | None:
    """Self-consistency: the most frequent answer (by `key`); ties go to the earliest."""
    counts: dict = {}
    first: dict = {}
    for a in answers:
        if a is None:
            continue
        k = key(a)
        if k is None:
            continue
        counts[k] = counts.get(k, 0) + 1
        first.setdefault(k, a)
    if not counts:
        return None
    best = max(counts, key=lambda k: (counts[k], -list(first).index(k)))
    return first[best]
