"""Reward-model best-of-N (RM@N): score the Maj@N rollouts, keep the highest-scored one.

The N rollouts are THE sample set of `sample_requests` (same requests, same cache keys
as majority.yaml, provided the `sampling` blocks agree), so after a Maj@N run only the
scorer's calls reach an engine. Scorer: `cfg["scorer"]` (retrace.engine.scorers).

Row: "samples" = the N rollouts; "extra" = {"scores": [N floats], "valid": [N bools],
"chosen": argmax (the first of equal scores), "scorer": scorer identity, "score_keys",
"compute": {"policy": tokens of the rollouts, "scorer": tokens of the scoring calls}}.
The RM@N answer is samples[chosen]; the plurality vote over samples is plain Maj@N.
"""

from __future__ import annotations

from retrace.config.settings import MethodSettings
from retrace.engine.scorers import ScoreItem, build_scorer
from retrace.methods.base import MethodContext, row, sample_requests, tokens_used
from retrace.util.records import Problem
from retrace.util.registry import METHODS


def argmax(values: list[float]) -> int:
    """Index of the largest value; ties go to the earliest (samples are in seed order)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


@METHODS.register("best_of_n")
def run(problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext) -> list[dict]:
    n = int(cfg["n"])
    requests = [r for p in problems for r in sample_requests(p, cfg.sampling, ctx, n)]
    completions = llm.generate(requests)
    groups = [completions[i * n : (i + 1) * n] for i in range(len(problems))]
    scorer = build_scorer(cfg, llm, ctx)
    scores = scorer.score([ScoreItem(p, c.text) for p, group in zip(problems, groups) for c in group])
    identity = scorer.identity()
    rows = []
    for i, (p, group) in enumerate(zip(problems, groups)):
        mine = scores[i * n : (i + 1) * n]
        values = [s.value for s in mine]
        rows.append(
            row(
                p,
                "best_of_n",
                group,
                {
                    "scores": values,
                    "valid": [s.valid for s in mine],
                    "chosen": argmax(values),
                    "scorer": identity,
                    "score_keys": [s.key for s in mine],
                    "compute": {"policy": tokens_used(group), "scorer": tokens_used(mine)},
                },
            )
        )
    return rows


run.calls_per_problem = lambda cfg: (
    2 * int(cfg["n"])
)  # N rollouts + N judge calls (retrace.planning.estimate)
