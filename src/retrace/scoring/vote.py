"""Plurality vote over extracted answers, grouping answers by equivalence.

Answers are grouped with the task's `same_answer(a, b)` (e.g. math-verify, so "1/2" and
"0.5" vote together), not by raw string. Each answer joins the first existing group
whose first member it is equivalent to; `same_answer` need not be transitive, and this
rule makes the grouping depend only on the order of the answers, not on hash order.

Rules:
- None (no extractable answer) never wins unless every answer is None.
- Ties go to the group whose first member appears earliest in the list, so the result is
  deterministic and, with samples in generation order, reproducible.

This does not cover weighted voting (e.g. by a reward model); that is a different method.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

SameAnswer = Callable[[str, str], bool]


def group_answers(answers: Sequence[str | None], same_answer: SameAnswer) -> list[list[int]]:
    """Indices of the non-None answers, grouped by equivalence, in order of first appearance."""
    groups: list[list[int]] = []
    heads: list[str] = []  # each group's first answer
    for i, ans in enumerate(answers):
        if ans is None:
            continue
        for head, group in zip(heads, groups):
            if same_answer(head, ans):
                group.append(i)
                break
        else:
            groups.append([i])
            heads.append(ans)
    return groups


def plurality_index(answers: Sequence[str | None], same_answer: SameAnswer) -> int | None:
    """Index of the first member of the winning group; None when no answer is extractable."""
    groups = group_answers(answers, same_answer)
    if not groups:
        return None
    # max() keeps the first of equal sizes, and groups are in order of first appearance:
    # that is the documented tie-break.
    return max(groups, key=len)[0]


def plurality_vote(answers: Sequence[str | None], same_answer: SameAnswer) -> str | None:
    """The winning answer (as its group's first member wrote it), or None if all are None."""
    idx = plurality_index(answers, same_answer)
    return None if idx is None else answers[idx]
