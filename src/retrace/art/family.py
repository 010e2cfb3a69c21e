"""ART as a method family (retrace.config.families): what the core asks of the experiment's `art:` block.

    retrace plan --experiment art_paper --estimate   # estimate_lines: run and selection jobs
    retrace plan --experiment art_paper --check      # config_checks: pins and context budget
    retrace art …                                    # commands

Each hook reads the block through art/plan.py and sizes jobs with art/resources.py and the
core's own tools (retrace.planning.estimate, retrace.planning.preflight); nothing here is imported by the core.
"""

from __future__ import annotations

from pathlib import Path

from retrace.config.families import FAMILIES, Context, Family, Rehearsal


def context_tokens(c: dict) -> int:
    """Worst-case context of an ART program: the demonstrations and the program being written.
    Settings the block leaves out take art/plan.py's defaults, the values its jobs run with."""
    from retrace.art.plan import DEFAULTS, SETTINGS
    from retrace.planning.preflight import DEFAULT_QUESTION_TOKENS

    s = {**SETTINGS, **(c.get("settings") or {})}
    program = int(s["program_tokens"])
    n_tasks = c.get("n_tasks") or DEFAULTS["n_tasks"]
    demos = int(str(n_tasks)) * int(s["demos_per_task"]) * program
    return DEFAULT_QUESTION_TOKENS + demos + program + int(s["max_steps"]) * int(s["segment_tokens"])


def _art_main(argv: list[str]) -> int | None:
    from retrace.art import cli

    return cli.main(argv)


@FAMILIES.register("art")
class Art(Family):
    block = "art"
    order = 30
    summary = "ART (Paranjape et al. 2023)"

    def methods(self) -> tuple[str, ...]:
        from retrace.art.plan import METHODS

        return tuple(METHODS)

    def estimate_lines(self, ctx: Context) -> list[str]:
        """The run jobs at each method's token bound, and the selection jobs (art/resources.py)."""
        from retrace.art import plan, resources
        from retrace.planning.estimate import FamilyEstimate

        cfg, est = plan.check(ctx.block(self)), FamilyEstimate("ART")
        jobs = plan.jobs(cfg)
        for job in jobs:
            est.add(job.model, cfg["backend"], resources.job_tokens(cfg, job.method), ctx.probe_dir)
        selections = {
            (j.model, j.task, plan.job_version(cfg, j))
            for j in jobs
            if plan.uses_library(j) and plan.needs_selection(j.task)
        }
        for model, _task, _version in sorted(selections):
            est.add(model, cfg["backend"], resources.select_tokens(cfg), ctx.probe_dir)
        return [est.line()]

    def pilot_roles(self, ctx: Context) -> list[dict]:
        """A program's last segment: the demonstrations and every earlier step in its context."""
        merged = dict(ctx.block(self))
        from retrace.art.plan import SETTINGS  # the settings' defaults (one place)

        out = int({**SETTINGS, **(merged.get("settings") or {})}["segment_tokens"])
        over = tuple(merged.get("overrides", ()))
        tokens = context_tokens(merged)
        return [
            {
                "model": m,
                "backend": merged["backend"],
                "overrides": over,
                "role": "art",
                "context": tokens - out,
                "max_tokens": out,
            }
            for m in merged.get("models", [])
        ]

    def config_checks(self, ctx: Context) -> list[tuple[str, str]]:
        from retrace.planning.preflight import family_problems

        merged = dict(ctx.block(self))
        return family_problems(self.name, merged, context_tokens(merged))

    def resolved_jobs(self, block: dict, config_dir: Path) -> dict:
        """Each ART job's config slice (its rerun key's config; ART has no defaults file)."""
        from retrace.art import plan

        cfg = plan.check(block)
        return {job.path: plan.config_slice(cfg, job) for job in plan.jobs(cfg)}

    def claim_names(self) -> set[str]:
        from retrace.art.summary import CLAIMS, FEEDBACK_CLAIM

        return {c[0] for c in CLAIMS} | {FEEDBACK_CLAIM}

    def claims_design(self, block: dict, mirror: str, design) -> None:
        from retrace.art.rehearsal import add_design

        add_design(block, design, mirror)

    def rehearsal_note(self) -> str:
        from retrace.art.rehearsal import NOTE

        return NOTE

    def rehearsal_datasets(self, block: dict) -> tuple[set[str], set[str]]:
        from retrace.art.rehearsal import datasets

        return set(), datasets(block)

    def rehearsal_block(self, block: dict, rehearsal: Rehearsal) -> dict:
        from retrace.art.rehearsal import simulated_block

        return simulated_block(block, rehearsal.scale, rehearsal.effects)

    def planted_truths(
        self, rows: list[dict], truths: list[float], effects: list[dict], config_dir: Path
    ) -> list[float]:
        from retrace.art.rehearsal import planted_truths

        return planted_truths(rows, truths, effects, config_dir)

    def simulated_texts(self) -> dict:
        """ART's programs, baselines and code tool in its program grammar (art/simulated.py)."""
        from retrace.art.simulated import ART_TAGS, text

        return dict.fromkeys(ART_TAGS, text)

    def commands(self) -> dict:
        return {"art": _art_main}

    def data_files(self) -> dict[str, list[str]]:
        return {"retrace.art.program": ["program.lark"]}  # the program grammar the parser reads
