"""`retrace rehearse`: will this experiment detect what it claims, and never call noise supported?

    retrace rehearse --experiment paper --scale 0.1          # the whole workflow, simulated engine
    retrace rehearse --experiment paper --design-only        # seconds: scores simulated from the design
    retrace rehearse --experiment drr_paper --design-only --effects my_effects.yaml --power-runs 40

By default it runs the experiment's whole Snakemake DAG (data -> generate -> score ->
diagnose -> claims -> report -> audit) on the simulated engine in a run directory of its own
(`--run-dir`, default rehearsals/<experiment>; retrace.app.rehearse_workflow says what is
simulated and what is real), with the effects of an effects YAML planted in the engine's
answers (default config/rehearse/effects.yaml) and each dataset cut to a fraction `--scale`
of its questions; then it reads the run's claims.csv and checks each verdict against the
planted truth. `--design-only` skips the workflow: it simulates per-question outcomes from
the experiment's claims design (retrace.scoring.design) and runs the claims code on them.
Either way it prints, per claim row, the planted effect, the verdict and whether it matches,
then:

    planted effects recovered: X/Y          planted rows (|effect| > 0) read as planted
    planted rows with the wrong sign: W     planted rows read the other way (never "missed")
    null rows falsely supported: Z          null rows read "supported" (the goal: 0)
    null rows falsely contradicted: C       null rows read "contradicted" (the goal: 0)
    jobs: J run in T s wall, C s CPU ...    the workflow's jobs (design-only: J planned)
    power at full n (--scale 1) per planted claim, over simulated experiments
    planted effects detected with power >= 0.9 at full n: A/B (N runs each; Monte-Carlo error <= E)

The power statement always comes from the design (retrace.scoring.design: plan.jobs seeds,
temperature-0 labels, weaker-model pairs, the dataset configs' question counts, the
experiment's Holm families) at full size, over as many simulated experiments as it takes for
every row's Monte-Carlo error (one standard error) to be <= 0.03 (`--power-runs N`: exactly
N, its error printed all the same). Where the effects YAML plants nothing on the
experiment's rows (refine_smoke), power is for +10 points on each row's method label.
Everything it prints is labelled SIMULATED: the verdicts say what the design can detect,
nothing about the models. Works from a clone alone: no mirror is needed for --design-only. The workflow rehearsal covers the
spine, DRR (its discriminator and SFT-LoRA simulated) and ART (programs written by the
simulated engine, their tools run for real).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from retrace.config.compose import CONFIG_DIR

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
    contradicted, when the truth opposes the claim's direction): the other of the two is
    "wrong sign", inconclusive "missed". A null row should read neither: "NO (false
    supported)" or "NO (false contradicted)". A non-inferiority row (a margin) is judged
    against its margin: with no planted effect it should read supported
    (scoring.verdicts.true_verdict)."""
    from retrace.scoring.claims import row_margin
    from retrace.scoring.verdicts import true_verdict

    want = true_verdict(row.get("direction") or "greater", row_margin(row), effect)
    if want == "inconclusive":  # the truth sits at the row's null value (0, or its margin)
        return "yes" if row["verdict"] == "inconclusive" else f"NO (false {row['verdict']})"
    if row["verdict"] == want:
        return "yes"
    return "missed" if row["verdict"] == "inconclusive" else "wrong sign"


def rehearse_once(d, plant: dict, seed: int, screen: bool = False) -> list[tuple[dict, float]]:
    """One simulated experiment's adjusted rows with their planted truths; `screen`: rows that
    cannot be significant skip the exact test (verdicts unchanged: scoring.design._screened)."""
    from retrace.scoring.design import simulate_rows, truth

    rows = d.adjust(simulate_rows(d, np.random.default_rng(seed), (0.4, 2.0), plant, screen=screen))
    return [(r, truth(spec, plant)) for r, spec in zip(rows, d.rows, strict=True)]


MC_ERROR = 0.03  # the largest Monte-Carlo error (one standard error) of a printed power
BATCH, MAX_RUNS = 20, 2000


def mc_error(hits: int, runs: int) -> float:
    """One standard error of a share hits/runs, at the shrunk share (hits + 1) / (runs + 2), so
    that a row detected every time still shows the error its run count allows (not 0)."""
    p = (hits + 1) / (runs + 2)
    return float(np.sqrt(p * (1 - p) / runs)) if runs else 1.0


def default_plant(d) -> dict:
    """+10 points on each row's method label in its cells: the power question for an
    experiment whose effects YAML plants nothing on its rows (refine_smoke)."""
    return {(*key, row[3]): 0.10 for row in d.rows for key in row[8] if row[9] != "weaker"}


def power(
    d, plant: dict, runs: int | None, seed: int, target: float = MC_ERROR
) -> tuple[dict[tuple, float], int, float]:
    """({(claim, model, dataset, effect): share of full-size experiments that detect it}, runs
    made, largest Monte-Carlo error). `runs`: exactly so many; None: batches of BATCH until
    every row's error is <= `target` (at most MAX_RUNS)."""
    hits: defaultdict = defaultdict(int)
    done = 0
    while done < (runs or MAX_RUNS):
        for _ in range(min(BATCH, (runs or MAX_RUNS) - done)):
            done += 1
            for r, effect in rehearse_once(d, plant, seed + done, screen=True):
                if effect:
                    hits[(r["claim"], r["model"], r["dataset"], effect)] += judge(r, effect) == "yes"
        error = max((mc_error(h, done) for h in hits.values()), default=0.0)
        if runs is None and error <= target:
            break
    return {k: v / done for k, v in hits.items()}, done, error


def print_power(d, powers: dict[tuple, float], runs: int, write=print, error: float | None = None) -> None:
    """One line per planted row, tagged with its family when the experiment pre-registers
    primary claims, then the count of rows detected with power >= 0.9, per family, with the
    runs and the largest Monte-Carlo error behind them."""
    family = (
        {k: "primary" if {"claim": k[0], "dataset": k[2]} in d.primary else "exploratory" for k in powers}
        if d.primary
        else dict.fromkeys(powers, "")
    )
    for (claim, model, dataset, effect), p in sorted(powers.items()):
        tag = f"[{family[(claim, model, dataset, effect)]}] " if d.primary else ""
        write(
            f"power at full n (--scale 1), {100 * effect:+.0f} points: {p:.2f}  {tag}{claim} / {model} / {dataset}"
        )
    counts = []
    for name in sorted(set(family.values()), key=lambda n: n != "primary"):
        rows = [p for k, p in powers.items() if family[k] == name]
        label = {"primary": "primary claims ", "exploratory": "exploratory rows ", "": ""}[name]
        counts.append(f"{label}{sum(p >= 0.9 for p in rows)}/{len(rows)}")
    err = f"; Monte-Carlo error <= {error:.3f}" if error is not None else ""
    counts = counts or ["0/0 (no planted row)"]
    write(
        f"planted effects detected with power >= 0.9 at full n: {', '.join(counts)} ({runs} runs each{err})"
    )


def report(out: list[tuple[dict, float]], write=print) -> dict[str, int]:
    """Print the per-row table and return the counts: recovered, planted, wrong_sign,
    false_supported, false_contradicted."""
    write(f"{'claim':58} {'model':36} {'dataset':14} {'planted':>8} {'verdict':13} matches")
    counts = dict.fromkeys(("recovered", "planted", "wrong_sign", "false_supported", "false_contradicted"), 0)
    for r, effect in out:
        match = judge(r, effect)
        write(
            f"{r['claim'][:58]:58} {r['model'][:36]:36} {r['dataset'][:14]:14} {100 * effect:+8.1f} "
            f"{r['verdict']:13} {match}"
        )
        counts["planted"] += bool(effect)
        counts["recovered"] += bool(effect) and match == "yes"
        counts["wrong_sign"] += match == "wrong sign"
        counts["false_supported"] += match == "NO (false supported)"
        counts["false_contradicted"] += match == "NO (false contradicted)"
    return counts


def workflow_rows(a) -> tuple[list[tuple[dict, float]], str]:
    """Run the experiment's workflow on the simulated engine; (rows with truth, jobs line)."""
    from retrace.app import rehearse_workflow as rw
    from retrace.util.yamlfile import load_yaml

    root = rw.derive(
        a.experiment, a.scale, a.effects, a.run_dir or Path("rehearsals") / a.experiment, a.mirror
    )
    stats = rw.run_workflow(root, a.cores)
    if stats["returncode"]:
        raise ValueError(f"the rehearsal's workflow failed (exit {stats['returncode']}); see {stats['log']}")
    line = (
        f"jobs: {stats['jobs']} run in {stats['wall_s']:.0f} s wall, {stats['cpu_s']:.0f} s CPU "
        f"({a.cores} cores, {root}); cached requests: {rw.cached_requests(root)}"
    )
    exp = load_yaml(root / "config" / "experiment" / f"{a.experiment}.yaml")
    line = "\n".join([*rw.notes(exp), line, rw.bound_line(root, a.experiment)])
    return rw.check_claims(root, a.effects), line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="retrace rehearse",
        description=__doc__.split("\n")[0],
        epilog="examples:\n" + "\n".join(__doc__.split("\n")[2:5]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--experiment", required=True, help="config/experiment/<name>.yaml")
    ap.add_argument("--scale", type=float, default=0.1, help="fraction of each dataset's questions")
    ap.add_argument("--effects", type=Path, default=EFFECTS, help="planted effects YAML")
    ap.add_argument("--design-only", action="store_true", help="simulate scores from the design; no workflow")
    ap.add_argument("--run-dir", type=Path, default=None, help="the rehearsal's run (default rehearsals/EXP)")
    ap.add_argument("--cores", type=int, default=2, help="Snakemake --cores for the workflow")
    ap.add_argument(
        "--power-runs",
        type=int,
        default=None,
        help=f"full-size simulated experiments for power (default: until its error is <= {MC_ERROR})",
    )
    ap.add_argument("--mirror", default=None, help="benchmark mirror (question counts)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from retrace.planning.plan import jobs
    from retrace.scoring.design import design, truth

    t0 = time.perf_counter()
    try:
        d = design(a.experiment, a.mirror)
        plant = planted(d, a.effects)
        if a.design_only:
            out = rehearse_once(scaled(d, a.scale), plant, a.seed)
            n_jobs = len(jobs({"experiment": a.experiment}))
            line = f"jobs: {n_jobs} planned, scores simulated in {time.perf_counter() - t0:.1f} s"
        else:
            out, line = workflow_rows(a)
    except (ValueError, OSError) as e:
        print(f"rehearse: {e}", file=sys.stderr)
        return 2
    how = (
        "scores simulated from the design" if a.design_only else "the whole workflow on the simulated engine"
    )
    print(
        f"SIMULATED rehearsal of {a.experiment} at scale {a.scale:g} (effects: {a.effects}): {how}; "
        "no model ran; verdicts say what the design can detect"
    )
    counts = report(out)
    print(f"planted effects recovered: {counts['recovered']}/{counts['planted']}")
    print(f"planted rows with the wrong sign: {counts['wrong_sign']}")
    print(f"null rows falsely supported: {counts['false_supported']}")
    print(f"null rows falsely contradicted: {counts['false_contradicted']}")
    print(line)
    if not any(truth(spec, plant) for spec in d.rows):
        plant = default_plant(d)
        print("the effects plant nothing on this experiment's rows: power at +10 points on each row's method")
    powers, runs, error = power(d, plant, a.power_runs, a.seed)
    print_power(d, powers, runs, error=error)
    return 0
