"""`retrace rehearse`: will this experiment detect what it claims, and never call noise supported?

    retrace rehearse --experiment paper                      # scale 0.1, config/rehearse/effects.yaml
    retrace rehearse --experiment drr_paper --scale 1 --effects my_effects.yaml --power-runs 40

Reads the experiment's claims design (retrace.scoring.design: plan.jobs seeds, temperature-0
labels, weaker-model pairs, question counts from the mirror; DRR and ART families), plants
the effects of an effects YAML (the simulated engine's format, backends/simulated.py) in
simulated per-question outcomes at a fraction `--scale` of each dataset's questions, and
runs the real claims code (compare, then one Holm family for the experiment). Prints per
claim row the planted effect, the verdict and whether it matches the truth, then:

    planted effects recovered: X/Y          planted rows (|effect| > 0) read "supported"
    null rows falsely supported: Z          null rows read "supported"
    jobs: J planned, simulated in T s       the experiment's jobs; its scores simulated
    power at full n (--scale 1) per planted claim, over --power-runs simulated experiments
    planted effects detected with power >= 0.9 at full n: A/B

What it does not do: it simulates the scores the jobs would produce, not the jobs; to walk
the DAG itself with the simulated engine, run the workflow with `backend=simulated`
(config/backend/simulated.yaml), which answers without a model. Its verdicts are labelled
simulated: they say what the design can detect, nothing about the models.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from retrace.config import CONFIG_DIR

EFFECTS = CONFIG_DIR / "rehearse" / "effects.yaml"


def planted(d, effects_path: Path) -> dict:
    """{(model, dataset, label): effect as a fraction} from an effects YAML, over the design's cells."""
    from retrace.backends.simulated import load_effects, planted_points

    effects = load_effects(effects_path)
    out = {}
    for (model, dataset), cell in d.cells.items():
        for label in cell["labels"]:
            points = planted_points(effects, model, dataset, label)
            if points:
                out[(model, dataset, label)] = points / 100
    return out


def scaled(d, scale: float):
    """The design with each cell's questions cut to max(1, round(scale * n))."""
    import copy

    if not 0 < scale <= 1:
        raise ValueError(f"--scale must lie in (0, 1], got {scale}")
    small = copy.deepcopy(d)
    for cell in small.cells.values():
        cell["n"] = max(1, round(scale * cell["n"]))
    return small


def judge(row: dict, effect: float) -> str:
    """Does a verdict match the planted truth? A planted row should read supported (or
    contradicted, when the truth opposes the claim's direction); a null row neither."""
    sign = 1 if row["direction"] == "greater" else -1
    if effect == 0:
        return "yes" if row["verdict"] == "inconclusive" else "NO (false)"
    want = "supported" if sign * effect > 0 else "contradicted"
    return "yes" if row["verdict"] == want else "missed"


def rehearse_once(d, plant: dict, seed: int) -> list[tuple[dict, float]]:
    from retrace.scoring.claims import adjust
    from retrace.scoring.design import simulate_rows, truth

    rows = adjust(simulate_rows(d, np.random.default_rng(seed), (0.4, 2.0), plant))
    return [(r, truth(spec, plant)) for r, spec in zip(rows, d.rows)]


def power(d, plant: dict, runs: int, seed: int) -> dict[tuple, float]:
    """Per planted row (claim, model, dataset): share of `runs` full-size experiments that detect it."""
    hits = defaultdict(int)
    for i in range(runs):
        for r, effect in rehearse_once(d, plant, seed + 1 + i):
            if effect:
                hits[(r["claim"], r["model"], r["dataset"], effect)] += judge(r, effect) == "yes"
    return {k: v / runs for k, v in hits.items()}


def report(out: list[tuple[dict, float]], write=print) -> tuple[int, int, int]:
    """Print the per-row table and return (recovered, planted, falsely supported)."""
    write(f"{'claim':58} {'model':36} {'dataset':14} {'planted':>8} {'verdict':13} matches")
    recovered = n_planted = false = 0
    for r, effect in out:
        match = judge(r, effect)
        write(
            f"{r['claim'][:58]:58} {r['model'][:36]:36} {r['dataset'][:14]:14} {100 * effect:+8.1f} "
            f"{r['verdict']:13} {match}"
        )
        n_planted += bool(effect)
        recovered += bool(effect) and match == "yes"
        false += not effect and r["verdict"] == "supported"
    return recovered, n_planted, false


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="retrace rehearse",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  retrace rehearse --experiment paper --scale 0.1\n"
        "  retrace rehearse --experiment drr_paper --effects my_effects.yaml --power-runs 40",
    )
    ap.add_argument("--experiment", required=True, help="config/experiment/<name>.yaml")
    ap.add_argument("--scale", type=float, default=0.1, help="fraction of each dataset's questions")
    ap.add_argument("--effects", type=Path, default=EFFECTS, help="planted effects YAML")
    ap.add_argument("--power-runs", type=int, default=20, help="full-size simulated experiments for power")
    ap.add_argument("--mirror", default=None, help="benchmark mirror (question counts)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from retrace.plan import jobs
    from retrace.scoring.design import design

    t0 = time.perf_counter()
    try:
        d = design(a.experiment, a.mirror)
        plant = planted(d, a.effects)
        out = rehearse_once(scaled(d, a.scale), plant, a.seed)
    except (ValueError, OSError) as e:
        print(f"rehearse: {e}", file=sys.stderr)
        return 2
    print(
        f"SIMULATED rehearsal of {a.experiment} at scale {a.scale:g} (effects: {a.effects}): "
        "no model ran; verdicts say what the design can detect"
    )
    recovered, n_planted, false = report(out)
    print(f"planted effects recovered: {recovered}/{n_planted}")
    print(f"null rows falsely supported: {false}")
    n_jobs = len(jobs({"experiment": a.experiment}))
    print(f"jobs: {n_jobs} planned, scores simulated in {time.perf_counter() - t0:.1f} s")
    powers = power(d, plant, a.power_runs, a.seed)
    for (claim, model, dataset, effect), p in sorted(powers.items()):
        print(
            f"power at full n (--scale 1), {100 * effect:+.0f} points: {p:.2f}  {claim} / {model} / {dataset}"
        )
    strong = sum(p >= 0.9 for p in powers.values())
    print(
        f"planted effects detected with power >= 0.9 at full n: {strong}/{len(powers)} ({a.power_runs} runs each)"
    )
    return 0
