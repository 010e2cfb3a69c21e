"""The spine as a method family (retrace.config.families): what the core asks of the experiment's
`runs:` list — the sampling methods and refinement, generated, scored and claimed.

    retrace plan --experiment paper --check   # runtimes, config_checks (spine/checks.py)
    retrace generate|score|score-cell|claims …  # its steps (spine/commands.py), registered on import

It has no block of its own (`runs:` is the experiment's spine), so it is always active and
comes first (order 10). Its jobs are retrace.planning.plan's; its sizes retrace.planning.sizing's.
"""

from __future__ import annotations

import retrace.spine.commands  # noqa: F401  (registers the spine's steps: generate, score, claims …)
from retrace.config.families import FAMILIES, Context, Family


@FAMILIES.register("spine")
class Spine(Family):
    order = 10
    summary = "sampling methods and refinement"

    def runtimes(self, ctx: Context) -> list:
        """The generation jobs as the workflow runs them (retrace.planning.parts.sized at ctx.limit): each
        cell part, which keeps one attempt for faults and names a label too long for any part,
        and each sharded label's shard jobs (one attempt kept for faults too), as OverLimit records."""
        from retrace.planning.cluster import Limit, OverLimit
        from retrace.planning.parts import sized
        from retrace.planning.plan import jobs, shared_overrides
        from retrace.planning.sizing import RUNTIME_OVERHEAD_MIN

        limit = ctx.limit or Limit()
        dso = shared_overrides(ctx.global_cfg, "dataset")
        s = sized(jobs(ctx.global_cfg), ctx.mirror, dso, ctx.probe_dir, limit)
        out, kept = [], limit.attempts - limit.per_part()
        for p in s.parts:
            labels = [j.label for j in p.part.labels]
            hint = f"give {labels[0]} `shards:` in the experiment" if len(labels) == 1 else ""
            where = f"{p.part.path} ({', '.join(labels)})"
            out.append(OverLimit("generate_cell", where, p.minutes(), True, RUNTIME_OVERHEAD_MIN, kept, hint))
        for j, b in s.shards:  # a shard job keeps one attempt for faults too
            hint = f"give {j.label} more `shards:` in the experiment"
            out.append(OverLimit(b.rule, b.path, b.minutes() or 0, True, RUNTIME_OVERHEAD_MIN, kept, hint))
        return out

    def config_checks(self, ctx: Context) -> list[tuple[str, str]]:
        """Every generation job's engine problems (GPU memory at the share of the engine it
        shares in its cell), then the equal-budget check (spine/checks.py)."""
        from retrace.planning.plan import jobs, shared_overrides
        from retrace.spine.checks import budget_problems, coresident_problems, job_problems

        planned = jobs(ctx.global_cfg)
        dso = shared_overrides(ctx.global_cfg, "dataset")
        shares = _shares(planned)
        out = [(j.path, p) for j in planned for p in job_problems(j, ctx.mirror, dso, shares.get(j.path))]
        return out + coresident_problems(planned, shares) + budget_problems(planned)


def _shares(planned: list) -> dict[str, dict]:
    """Each cell label's memory share on the engine it may share (retrace.planning.cells.shared_memory):
    the smallest any label of its cell with its engine identity asks, whichever part runs it."""
    from retrace.planning.cells import engine_identity, generation_cells, shared_memory

    out = {}
    for cell in generation_cells(planned).values():
        by_identity: dict[str, list] = {}
        for j in cell:
            by_identity.setdefault(engine_identity(j), []).append(j)
        out.update({j.path: shared_memory(tuple(js)) for js in by_identity.values() for j in js})
    return out
