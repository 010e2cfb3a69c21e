"""Task-averaged (macro) comparisons for ART's claims: the paper reports gains averaged over
tasks (ART §1 p. 2, "average improvement ... across unseen BigBench and MMLU tasks"), not
over pooled questions.

    w = task_weights(runs_a + runs_b)          # {task:question: weight}
    claim_row(..., task_averaged(runs_a, w), task_averaged(runs_b, w))   # delta = macro gain

Keys are "<task>:<question>" as art/summary.py builds them.
"""

from __future__ import annotations


def task_weights(runs: list[dict]) -> dict[str, float]:
    """{task:question: weight} so that the plain mean over questions of weighted scores is the
    task-averaged (macro) mean the paper reports: weight = questions / (tasks x the question's
    task's questions). Each task then counts once, however many questions it has."""
    keys = sorted(set().union(*runs)) if runs else []
    per_task: dict[str, int] = {}
    for k in keys:
        per_task[k.split(":", 1)[0]] = per_task.get(k.split(":", 1)[0], 0) + 1
    return {k: len(keys) / (len(per_task) * per_task[k.split(":", 1)[0]]) for k in keys}


def task_averaged(runs: list[dict], weights: dict[str, float]) -> list[dict]:
    """Runs with each question's score times its weight (task_weights): the paired comparison
    of such runs (scoring/claims.py) has the macro difference as its delta, its CI over
    questions, and the same wins/ties/losses and sign-flip test as the pooled one."""
    return [{k: v * weights[k] for k, v in run.items()} for run in runs]
