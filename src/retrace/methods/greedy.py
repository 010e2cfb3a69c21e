"""Greedy decoding: one temperature-0 answer per problem (config/method/greedy.yaml)."""

from __future__ import annotations

from retrace.config.settings import MethodSettings
from retrace.methods.base import MethodContext, problem_messages, row, sampling
from retrace.util.records import Problem, Request
from retrace.util.registry import METHODS


@METHODS.register("greedy")
def run(problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext) -> list[dict]:
    # Greedy ignores the temperature in the config on purpose: that is what makes it greedy.
    requests = [
        Request(
            messages=problem_messages(p, ctx),
            sampling=sampling(cfg.sampling, ctx.seed, temperature=0.0),
            tag=p.id,
        )
        for p in problems
    ]
    completions = llm.generate(requests)
    return [row(p, "greedy", [c]) for p, c in zip(problems, completions)]


run.calls_per_problem = lambda cfg: 1  # for retrace.planning.estimate
