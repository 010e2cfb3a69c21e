"""Majority voting (Maj@N): N sampled rollouts per problem; the vote happens in scoring.

Sample once, score many: all N rollouts are stored with their token counts, and
scoring computes maj@k / pass@k for k = 1, 2, 4 … N from them (config/method/majority.yaml).
"""

from __future__ import annotations

from retrace.config.settings import MethodSettings
from retrace.methods.base import MethodContext, row, sample_requests
from retrace.util.records import Problem
from retrace.util.registry import METHODS


@METHODS.register("majority")
def run(problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext) -> list[dict]:
    n = int(cfg["n"])
    requests = [r for p in problems for r in sample_requests(p, cfg.sampling, ctx, n)]
    completions = llm.generate(requests)
    return [row(p, "majority", completions[i * n : (i + 1) * n]) for i, p in enumerate(problems)]


run.calls_per_problem = lambda cfg: int(cfg["n"])  # for retrace.planning.estimate
