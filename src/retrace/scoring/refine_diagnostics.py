"""Refinement dynamics per depth, from stored refine rows (no generation):
`diagnose(rows, problems, task)`.

Same interface as scoring/score.py: rows of one refine job, problems by id, and a task with
`extract_answer`, `is_correct` and `same_answer`. Each row's extra["depths"][d][i]["text"]
is rollout i's trace at depth d (retrace.methods.refine). Per depth d (d >= 1 for flips):

- accuracy             plurality-vote accuracy over the rollouts' depth-d answers
- rollout_accuracy     share of rollouts whose depth-d answer is right
- recovered/regressed  problems whose vote went wrong -> right / right -> wrong from d-1 to d;
                       *_rate divides by all problems (so accuracy[d] - accuracy[d-1] =
                       recovery_rate - regression_rate); *_rate_given divides by the problems
                       that could flip (wrong, resp. right, at d-1), None when there are none
- benefit              per-rollout net correction benefit B(d) = (#rollouts wrong -> right
                       - #rollouts right -> wrong) / #rollouts (the paper's Figure 4)
- diversity            distinct answer classes (by `same_answer`) among a problem's rollouts
                       divided by its number of rollouts, averaged over problems: 1 = every
                       rollout answers differently, 1/N = all agree (normalised as the
                       paper's 0.80-0.97 values are); no-answer rollouts form no class
- answer_classes       the same count before normalising

`grid` is the paper's N × D table (its Table 3) read from one run, with no new generation:
accuracy of the vote over the first n rollouts at depth d, for n = 1, 2, 4 … N and d = 0 … D
(the first n rollouts of a run with N are exactly the rollouts of a run with n: same seeds).

`terminal_vs_depth0` tests whether refinement helped the vote on the same questions:
paired bootstrap CI of accuracy[D] - accuracy[0] and an exact McNemar test (scoring/stats.py),
as the review of arXiv:2608.05643 asks. Not covered: significance of per-depth flips.
"""

from __future__ import annotations

from typing import Any

from retrace.scoring.metrics import DEFAULT_BOOT, DEFAULT_SEED, ks_for
from retrace.scoring.score import check_rows, safe_extract
from retrace.scoring.stats import mcnemar_exact, paired_bootstrap_diff
from retrace.scoring.vote import group_answers, plurality_index
from retrace.util.records import Problem


def judge_depths(row: dict, problem: Problem, task: Any) -> list[dict]:
    """Per depth of one row: the rollouts' answers, their correctness, the vote and diversity."""
    depths = (row.get("extra") or {}).get("depths")
    if not depths:
        raise ValueError(f"row {row.get('problem_id')!r} has no extra.depths: not a refine row")
    out = []
    for recs in depths:
        answers = [safe_extract(task, rec.get("text"), problem)[0] for rec in recs]
        correct = [a is not None and bool(task.is_correct(a, problem)) for a in answers]
        idx = plurality_index(answers, task.same_answer)
        out.append(
            {
                "answers": answers,
                "correct": correct,
                "vote_correct": idx is not None and correct[idx],
                "answer_classes": len(group_answers(answers, task.same_answer)),
                "diversity": len(group_answers(answers, task.same_answer)) / len(recs),
            }
        )
    return out


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def vote_flips(before: list[bool], after: list[bool]) -> dict:
    """Vote-level recovery and regression between two depths (per-problem vote flags)."""
    recovered = sum(not b and a for b, a in zip(before, after))
    regressed = sum(b and not a for b, a in zip(before, after))
    wrong, right = before.count(False), before.count(True)
    return {
        "recovered": recovered,
        "regressed": regressed,
        "recovery_rate": recovered / len(before),
        "regression_rate": regressed / len(before),
        "recovery_rate_given": _rate(recovered, wrong),
        "regression_rate_given": _rate(regressed, right),
    }


def rollout_flips(before: list[list[bool]], after: list[list[bool]]) -> dict:
    """Per-rollout fixes and breaks between two depths, and B(d)."""
    pairs = [(b, a) for bs, as_ in zip(before, after) for b, a in zip(bs, as_)]
    fixed = sum(not b and a for b, a in pairs)
    broken = sum(b and not a for b, a in pairs)
    return {"rollouts_fixed": fixed, "rollouts_broken": broken, "benefit": (fixed - broken) / len(pairs)}


def depth_summary(judged: list[list[dict]], d: int) -> dict:
    """The depth-d record of `diagnose` from every problem's judged depths."""
    at = [p[d] for p in judged]
    votes = [x["vote_correct"] for x in at]
    n_rollouts = sum(len(x["correct"]) for x in at)
    out = {
        "depth": d,
        "accuracy": sum(votes) / len(votes),
        "rollout_accuracy": sum(sum(x["correct"]) for x in at) / n_rollouts,
        "diversity": sum(x["diversity"] for x in at) / len(at),
        "answer_classes": sum(x["answer_classes"] for x in at) / len(at),
    }
    if d > 0:
        prev = [p[d - 1] for p in judged]
        out.update(vote_flips([x["vote_correct"] for x in prev], votes))
        out.update(rollout_flips([x["correct"] for x in prev], [x["correct"] for x in at]))
    return out


def grid(judged: list[list[dict]], same_answer: Any) -> list[dict]:
    """[{"n", "depth", "accuracy"}] for the first n rollouts' vote at each depth."""
    n_max = min(len(j[0]["answers"]) for j in judged)
    out = []
    for n in ks_for(n_max):
        for d in range(min(len(j) for j in judged)):
            hits = 0
            for j in judged:
                idx = plurality_index(j[d]["answers"][:n], same_answer)
                hits += idx is not None and j[d]["correct"][idx]
            out.append({"n": n, "depth": d, "accuracy": hits / len(judged)})
    return out


def diagnose(
    rows: list[dict],
    problems: dict[str, Problem],
    task: Any,
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
) -> dict:
    """Per-depth diagnostics of one refine job (see module docstring); raises on bad rows."""
    rows = list(rows)
    check_rows(rows, problems)
    judged = [judge_depths(r, problems[str(r["problem_id"])], task) for r in rows]
    n_depths = min(len(j) for j in judged)
    first = [j[0]["vote_correct"] for j in judged]
    last = [j[n_depths - 1]["vote_correct"] for j in judged]
    return {
        "n_problems": len(rows),
        "depth": n_depths - 1,
        "depths": [depth_summary(judged, d) for d in range(n_depths)],
        "grid": grid(judged, task.same_answer),
        "terminal_vs_depth0": {
            **paired_bootstrap_diff(last, first, n_boot, seed),
            **mcnemar_exact(last, first),
        },
        "per_problem": [
            {
                "id": str(r["problem_id"]),
                "vote_correct": [x["vote_correct"] for x in j],
                "answers": [x["answers"] for x in j],
            }
            for r, j in zip(rows, judged)
        ],
    }
