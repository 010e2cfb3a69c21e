"""The spine as a method family (retrace.family): what the core asks of the experiment's
`runs:` list — the sampling methods and refinement, generated, scored and claimed.

    retrace plan --experiment paper --check   # runtimes, config_checks (spine/checks.py)
    retrace generate|score|score-cell|claims …  # its steps (spine/commands.py), registered on import

It has no block of its own (`runs:` is the experiment's spine), so it is always active and
comes first (order 10). Its jobs are retrace.plan's; its sizes retrace.sizing's.
"""

from __future__ import annotations

import retrace.spine.commands  # noqa: F401  (registers the spine's steps: generate, score, claims …)
from retrace.family import FAMILIES, Context, Family


@FAMILIES.register("spine")
class Spine(Family):
    order = 10
    summary = "sampling methods and refinement"

    def runtimes(self, ctx: Context) -> list:
        """Each generation job's bound (retrace.sizing.job_bounds) as an OverLimit record."""
        from retrace.cluster import OverLimit
        from retrace.plan import jobs, shared_overrides
        from retrace.sizing import RUNTIME_OVERHEAD_MIN, job_bounds

        dso = shared_overrides(ctx.global_cfg, "dataset")
        bounds = job_bounds(jobs(ctx.global_cfg), ctx.mirror, dso, ctx.probe_dir)
        return [OverLimit(b.rule, b.path, b.minutes() or 0, True, RUNTIME_OVERHEAD_MIN) for b in bounds]

    def config_checks(self, ctx: Context) -> list[tuple[str, str]]:
        """Every generation job's engine problems, then the equal-budget check (spine/checks.py)."""
        from retrace.plan import jobs, shared_overrides
        from retrace.spine.checks import budget_problems, job_problems

        planned = jobs(ctx.global_cfg)
        dso = shared_overrides(ctx.global_cfg, "dataset")
        out = [(j.path, p) for j in planned for p in job_problems(j, ctx.mirror, dso)]
        return out + budget_problems(planned)
