"""DRR in a rehearsal (`retrace rehearse --workflow`, retrace.app.rehearse_workflow): the block on
the simulated reasoner and discriminator, and the planted truth of DRR's claims rows;
and DRR's part of a claims design (retrace.scoring.design).

    block = simulated_block(exp["drr"], effects, copy)    # checked against the effects
    truths = planted_truths(rows, truths)                 # DRR's rows in their own metric
"""

from __future__ import annotations

from pathlib import Path

NOTE = (
    "DRR: reasoner on the simulated engine, discriminator SIMULATED (planted decisions, "
    "drr/simulated_dm.py), SFT-LoRA SIMULATED when the experiment enables it (drr/sft.py: "
    "no weights tuned; answers drawn under the label sft_lora)"
)


def datasets(block: dict) -> set[str]:
    """The evaluation and train sets the block reads."""
    from retrace.drr import settings

    return {n for e in settings.entries(settings.load(block)) for n in e.values() if n}


def simulated_block(block: dict, effects: Path, copy: Path) -> dict:
    """The DRR block on the simulated reasoner and DM (drr/simulated_dm.py), its DM jobs on the
    CPU; SFT-LoRA, when the experiment enables it, simulated on the CPU (drr/sft.py
    `simulated_run`: it would fine-tune the reasoner's own weights, which a rehearsal has not).
    Effects the simulation cannot plant exactly are refused (drr/simulated_dm.check_effects),
    against the engine of the rehearsal's config copy `copy`."""
    from retrace.backends.simulated import load_effects
    from retrace.drr import settings, simulated_dm

    sim = {"source": "simulated", "effects": str(effects)}
    sft = block.get("sft_lora") or {}
    out = {
        **block,
        "backend": "simulated",
        "backbone": "simulated",
        "backbones": {**(block.get("backbones") or {}), "simulated": sim},
        "dm": {**(block.get("dm") or {}), "device": "cpu"},
        "sft_lora": {**sft, "hf_model": settings.SIMULATED, "revision": None, "device": "cpu"},
    }
    cfg = settings.load(out, "drr (rehearsal copy)")
    simulated_dm.check_effects(cfg, load_effects(effects), simulated_dm.engine_settings("simulated", copy))
    return out


def planted_truths(rows: list[dict], truths: list[float]) -> list[float]:
    """DRR's rows in their own metric: with no abstention in the simulation
    (drr/simulated_dm.py) an accuracy gain P moves FS(k) by (1 + k)·P and Acc(D) by P; an
    Overall row (dataset "all") measures its datasets' truths weighted by their questions."""
    from retrace.drr.claims import CLAIMS, OVERALL

    scale = {claim: 1 + k if metric == "fs" else 1 for claim, _, _, metric, k in CLAIMS}
    out = [t * scale.get(r["claim"], 1) for r, t in zip(rows, truths)]
    for i, row in enumerate(rows):
        if row["claim"] in scale and row["dataset"] == OVERALL:
            same = lambda r: (
                (r["claim"], r["model"]) == (row["claim"], row["model"]) and r["dataset"] != OVERALL
            )
            parts = [(int(r["n_questions"]), t) for r, t in zip(rows, out) if same(r)]
            n = sum(w for w, _ in parts)
            out[i] = sum(w * t for w, t in parts) / n if n else 0.0
    return out


def add_design(block: dict, mirror: str, d) -> None:
    """DRR's cells and claim rows in a claims design (retrace.scoring.design.Design): each
    model × evaluation set (its eval file, or 1 - train_fraction of one file), and each claim
    per dataset and pooled over them (Table 1's Overall)."""
    from retrace.drr import settings
    from retrace.drr.claims import OVERALL, claim_list, tested_as
    from retrace.scoring import design

    cfg = settings.load(block)
    listed = claim_list(cfg["acc_abstention"])
    labels = {m: (len(cfg["seeds"]), False) for m in settings.methods(cfg)}  # draws (scoring/design.py)
    for model in cfg["models"]:
        for e in settings.entries(cfg):
            n = design._count(e["name"], mirror)
            n = n if e["train"] else n - round(float(cfg["train_fraction"]) * n)
            d.cells[(model, e["name"])] = {"n": n, "drr": True, "labels": labels}
            for claim, a, b, metric, k in listed:
                if a in labels and b in labels:
                    way = tested_as(claim)["direction"]
                    d.rows.append(
                        (claim, model, e["name"], a, b, way, metric, k, [(model, e["name"])], "plain")
                    )
        keys = [(model, e["name"]) for e in settings.entries(cfg)]  # Table 1's Overall: all pooled
        for claim, a, b, metric, k in listed:
            if a in labels and b in labels:
                d.rows.append(
                    (claim, model, OVERALL, a, b, tested_as(claim)["direction"], metric, k, keys, "pooled")
                )
    d.margins.update({c: tested_as(c)["margin"] for c, *_ in listed if tested_as(c)["margin"] is not None})
