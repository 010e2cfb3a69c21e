"""Lookahead search (config/method/lookahead.yaml): step-level beam search in which each
candidate step is scored by rolling it out `lookahead` more steps greedily and scoring the
end of that rollout, as in search-and-learn's lookahead variant
(https://github.com/huggingface/search-and-learn). The rollout is only looked at: the beam
keeps the candidate step alone, and the next round samples afresh from it.

Same search, scheduling (one task per problem), rows and compute accounting as
retrace.methods.beam (see its docstring); `extra["steps"][t]["candidates"][i]["lookahead"]`
holds the scored rollout text.
"""

from __future__ import annotations

from retrace.config.settings import MethodSettings
from retrace.methods.base import MethodContext
from retrace.methods.beam import run_search
from retrace.util.records import Problem
from retrace.util.registry import METHODS


@METHODS.register("lookahead")
def run(problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext) -> list[dict]:
    depth = int(cfg["lookahead"])
    if depth < 1:
        raise ValueError(f"lookahead: depth must be >= 1 (0 is plain beam search), got {depth}")
    return run_search(problems, cfg, llm, ctx, method="lookahead", lookahead=depth)


from retrace.methods.beam import _calls_per_problem  # noqa: E402  (same search, deeper scoring)

run.calls_per_problem = lambda cfg: _calls_per_problem(cfg, int(cfg["lookahead"]))
