"""DRR as a method family (retrace.config.families): what the core asks of the experiment's `drr:` block.

    retrace plan --experiment drr_paper --estimate   # estimate_lines: the reasoner jobs' tokens
    retrace plan --experiment drr_paper --check      # runtimes, config_checks, data_checks
    retrace drr …  /  retrace leakcheck --jsonl FILE # commands

Each hook reads the block through drr/settings.py and sizes jobs with the core's own tools
(retrace.planning.estimate, retrace.planning.cluster, retrace.planning.preflight); nothing here is imported by the core.
"""

from __future__ import annotations

from pathlib import Path

from retrace.config.families import FAMILIES, Context, Family, Rehearsal


def context_tokens(c: dict) -> int:
    """Worst-case context of a DRR episode: every turn's reply and feedback stay in the conversation."""
    from retrace.planning.preflight import CHAT_OVERHEAD, DEFAULT_QUESTION_TOKENS

    turns = max(int(c.get("max_turns_distil", 4)), int(c.get("max_turns_infer", 5)))
    return DEFAULT_QUESTION_TOKENS + turns * (int(c["max_tokens"]) + 2 * CHAT_OVERHEAD + 64)


def leak_problems(block: dict, mirror: str | None, notes: list[str]) -> list[tuple[str, str]]:
    """The gold-leak check over the evaluation prompts the DRR block would store, rehearsed
    from its datasets (drr.leakcheck.rehearse): a line per dataset in `notes`, a problem per
    dataset with findings."""
    from retrace.drr import leakcheck, settings

    out = []
    for r in leakcheck.rehearse(settings.load(block), mirror):
        if "skipped" in r:
            notes.append(f"drr leak check {r['dataset']}: not checked ({r['skipped']})")
            continue
        notes.append(
            f"drr leak check {r['dataset']}: {r['questions']} evaluation questions, "
            f"{r['records']} prompts and DM rows, {r['findings']} findings"
        )
        if r["findings"]:
            out.append(
                (f"drr:leak {r['dataset']}", f"{r['findings']} gold-leak findings, e.g. {r['excerpt']}")
            )
    return out


def _drr_main(argv: list[str]) -> int | None:
    from retrace.drr import cli

    return cli.main(argv)


def _leakcheck_main(argv: list[str]) -> int | None:
    from retrace.drr import leak

    return leak.main(argv)


@FAMILIES.register("drr")
class Drr(Family):
    block = "drr"
    order = 20
    summary = "DRR, its baselines and falsifiers"

    def methods(self) -> tuple[str, ...]:
        from retrace.drr.episodes import METHODS

        return tuple(METHODS)

    def estimate_lines(self, ctx: Context) -> list[str]:
        """The reasoner jobs (distil, generate) at questions × calls × max_tokens (drr/settings.py)."""
        from retrace.drr import settings
        from retrace.planning.estimate import FamilyEstimate

        cfg, est = settings.load(ctx.block(self)), FamilyEstimate("DRR reasoner")
        for model in cfg["models"]:
            for e in settings.entries(cfg):
                for _seed in cfg.get("seeds") or [0]:
                    for stage in ("distil", "generate"):
                        tokens = settings.reasoner_tokens(cfg, stage, e["name"], ctx.mirror)
                        est.add(model, cfg["backend"], tokens, ctx.probe_dir)
        return [est.line()]

    def runtimes(self, ctx: Context) -> list:
        from retrace.drr import settings

        return settings.runtimes(settings.load(ctx.block(self)), ctx.mirror)

    def hub_artifacts(self, ctx: Context) -> list[tuple[str, str]]:
        from retrace.drr import settings

        return settings.hub_artifacts(settings.load(ctx.block(self)))

    def pilot_roles(self, ctx: Context) -> list[dict]:
        """The reasoner's last turn: every earlier turn's reply and feedback in its context."""
        from retrace.planning.preflight import with_defaults

        merged = with_defaults(ctx.block(self), "drr/defaults.yaml")
        out, tokens = int(merged["max_tokens"]), context_tokens(merged)
        over = tuple(merged.get("overrides", ()))
        return [
            {
                "model": m,
                "backend": merged["backend"],
                "overrides": over,
                "role": "drr",
                "context": tokens - out,
                "max_tokens": out,
            }
            for m in merged.get("models", [])
        ]

    def config_checks(self, ctx: Context) -> list[tuple[str, str]]:
        from retrace.planning.preflight import family_problems, with_defaults

        merged = with_defaults(ctx.block(self), "drr/defaults.yaml")
        return family_problems(self.name, merged, context_tokens(merged))

    def data_checks(self, ctx: Context, notes: list[str]) -> list[tuple[str, str]]:
        return leak_problems(ctx.block(self), ctx.mirror, notes)

    def resolved_jobs(self, block: dict, config_dir: Path) -> dict:
        """Each DRR stage's config slice (its rerun key's config), and what the claims read."""
        from retrace.drr import settings

        cfg = settings.load(block, defaults_file=config_dir / "drr" / "defaults.yaml")
        out = {stage: settings.config_slice(stage, cfg) for stage in settings.SLICES}
        return {**out, "claims": {"acc_abstention": cfg["acc_abstention"]}}

    def claim_names(self) -> set[str]:
        from retrace.drr.claims import CLAIMS

        return {c[0] for c in CLAIMS}

    def claims_design(self, block: dict, mirror: str, design) -> None:
        from retrace.drr.rehearsal import add_design

        add_design(block, mirror, design)

    def rehearsal_note(self) -> str:
        from retrace.drr.rehearsal import NOTE

        return NOTE

    def rehearsal_datasets(self, block: dict) -> tuple[set[str], set[str]]:
        from retrace.drr.rehearsal import datasets

        return datasets(block), set()

    def rehearsal_block(self, block: dict, rehearsal: Rehearsal) -> dict:
        from retrace.drr.rehearsal import simulated_block

        return simulated_block(block, rehearsal.effects, rehearsal.config_dir)

    def planted_truths(
        self, rows: list[dict], truths: list[float], effects: list[dict], config_dir: Path
    ) -> list[float]:
        from retrace.drr.rehearsal import planted_truths

        return planted_truths(rows, truths)

    def commands(self) -> dict:
        return {"drr": _drr_main, "leakcheck": _leakcheck_main}

    def unhashed_modules(self) -> dict[str, str]:
        return {
            "retrace.drr.settings": "DRR's config block and keys (retrace.planning.plan's role); slices are hashed"
        }
