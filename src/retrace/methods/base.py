"""What every method shares: the context, seeds, the task prompt and the stored row format.

`sample_requests` builds THE sample set of a problem: sample i of a run with seed s always
has the same request (hence the same cache key), so Maj@N, refinement depth 0 and an
extended Maj@N' all reuse one generation of each rollout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from retrace.util.records import Completion, Message, Problem, Request, Sampling


@dataclass(frozen=True)
class MethodContext:
    seed: int  # the run seed (one job per seed)
    task: Any  # the dataset's Task plugin (prompt rendering)
    template: str  # the prompt template file for the dataset
    # The engine of a scorer whose model differs from the job's (retrace.engine.scorers);
    # None = score with the job's own llm. Shared helper added for the search baselines.
    scorer_llm: Any = None


def derive_seed(run_seed: int, problem_id: str, index: int) -> int:
    """A per-request seed that depends only on (run seed, problem, sample index)."""
    digest = hashlib.sha256(f"{run_seed}:{problem_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def sampling(settings: Sampling, seed: int, **changes: Any) -> Sampling:
    """One request's sampling: the method's typed `sampling:` block (retrace.config.settings),
    the request's seed and the method's own changes (a role's max_tokens, greedy's temperature)."""
    if "stop" in changes:
        changes["stop"] = tuple(changes["stop"] or ())
    return replace(settings, **changes, seed=seed)


def problem_messages(problem: Problem, ctx: MethodContext) -> tuple[Message, ...]:
    return (Message("user", ctx.task.prompt(problem, ctx.template)),)


def sample_requests(
    problem: Problem, settings: Sampling, ctx: MethodContext, n: int, start: int = 0
) -> list[Request]:
    """Samples start..n-1 of the problem's sample set under the method's sampling `settings`."""
    msgs = problem_messages(problem, ctx)
    return [
        Request(
            messages=msgs,
            sampling=sampling(settings, derive_seed(ctx.seed, problem.id, i)),
            sample_index=i,
            tag=f"{problem.id}#{i}",
        )
        for i in range(start, n)
    ]


def sample_record(index: int, c: Completion) -> dict:
    d = c.to_dict()
    d.pop("logprobs", None)  # kept in the request cache; rows stay small
    return {"index": index, **d}


def row(problem: Problem, method: str, completions: Sequence[Completion], extra: dict | None = None) -> dict:
    """The stored generation row of one problem (the format scoring reads)."""
    return {
        "problem_id": problem.id,
        "method": method,
        "samples": [sample_record(i, c) for i, c in enumerate(completions)],
        "extra": extra or {},
    }


def tokens_used(calls: Sequence[Any]) -> dict:
    """Token totals of some calls (Completions, or anything with the same three counts).

    Methods whose stored samples are not their whole cost (search, scoring calls) keep
    these totals in `extra["compute"]` so scoring can count every call once. Calls that
    share a non-empty cache `key` ran once (the cache serves the repeats) and count once.
    """
    calls = list({(c.key or id(c)): c for c in calls}.values())
    return {
        "requests": len(calls),
        "prompt_tokens": sum(int(c.prompt_tokens) for c in calls),
        "cached_prompt_tokens": sum(int(c.cached_prompt_tokens) for c in calls),
        "generated_tokens": sum(int(c.generated_tokens) for c in calls),
    }
