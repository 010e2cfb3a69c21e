"""Calibration of the claims engine on simulated nulls of each shipped experiment's own design.

    .venv/bin/python benchmarks/claims_calibration.py                # or: make calibrate
    .venv/bin/python benchmarks/claims_calibration.py --experiments 40 --only paper

For every shipped experiment with claims (paper, drr_paper, art_paper, refine_smoke) the
design comes from the experiment itself (retrace.scoring.design): `plan.jobs` gives the
models, datasets, method labels and seed counts, each label's sampling temperature says
whether its seeds are one draw (temperature 0: seed 0 counted once, as the claims stage
decides it), `claims.weaker` names the weaker-model pairs, and the question counts are the
dataset configs' own (checked against the mirror where one is readable: a clone alone
calibrates the same design); DRR's and ART's families come from their own claim lists and
settings. Per-question outcomes are simulated under the null (every method shares each
question's success probability, so every "supported" and every "contradicted" verdict is
false) and fed to the real claims code (scoring.claims compare_matrices, then adjust:
sign-flip or stratified exact test, CI, Holm over the experiment's family, or its primary
and exploratory families).

The null sweeps base accuracy (near 0, mid, near 1) and difficulty dispersion (questions
all alike vs many near 0 or 1: Beta with concentration 50 or 1); the smallest datasets
(AIME, 30 questions; the smoke's 10) are in every family. Prints on stdout:

    null family false-supported rate (EXPERIMENT): X   worst setting's share of null
        experiments with at least one "supported" row (<= 0.05 is the goal)
    null family false-contradicted rate (EXPERIMENT): X   the same for "contradicted"
    largest per-row false-supported rate (EXPERIMENT): Y (row, setting)
    null false-supported rate: X                       the paper's rate, pooled over settings
    power at +10 points, 500 questions: P +- E         "beats Maj@N" on MATH-500 with refine
        planted 10 points above every other method (mid accuracy, Beta(0.8, 1.2) difficulty);
        E its Monte-Carlo error (one standard error)
    power at +10 points, 500 questions (refine vs BASELINE): P +- E   the other main rows
    power (EXPERIMENT): planted effects detected with power >= 0.9 at full n: A/B (N runs
        each; Monte-Carlo error <= E)   `retrace rehearse`'s power statement: the effects of
        config/rehearse/effects.yaml (+10 points on each row's method where they plant none
        of the experiment's rows, as for refine_smoke), runs until E <= 0.03

Details (settings, rows per family, timings) go to stderr. A design that cannot be built (a
dataset config without `questions:`, or one the mirror contradicts) is one line on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

import numpy as np

from retrace.scoring.design import Design, design, simulate_rows

EXPERIMENTS = ("paper", "drr_paper", "art_paper", "refine_smoke")
# (base accuracy, Beta concentration): near 0 / mid / near 1, each homogeneous and dispersed
SETTINGS = [(mu, conc) for mu in (0.05, 0.5, 0.95) for conc in (50.0, 1.0)]
EFFECT = 0.10
POWER_ROWS = ("majority", "greedy", "majority_eq", "majority_eq_nominal")


def null_family(d: Design, rng, setting, n_exp: int, counts: Counter | None = None) -> tuple[float, Counter]:
    """(share of experiments with a false 'supported', supported count per row name); the
    experiments with a false 'contradicted' are counted into `counts["contradicted"]`."""
    hits, per_row = 0, Counter()
    for _ in range(n_exp):
        rows = d.adjust(simulate_rows(d, rng, setting))
        bad = [r for r in rows if r["verdict"] == "supported"]
        hits += bool(bad)
        per_row.update(f"{r['claim']} / {r['model']} / {r['dataset']}" for r in bad)
        if counts is not None:
            counts["contradicted"] += any(r["verdict"] == "contradicted" for r in rows)
    return hits / n_exp, per_row


def calibrate(d: Design, n_exp: int, seed: int) -> dict:
    """Null rates of one experiment over SETTINGS, false "supported" and false "contradicted":
    worst, pooled, and the worst single row (supported)."""
    rates, contra, worst_row = {}, {}, (0.0, "", None)
    for i, setting in enumerate(SETTINGS):
        counts: Counter = Counter()
        rate, per_row = null_family(d, np.random.default_rng([seed, i]), setting, n_exp, counts)
        rates[setting], contra[setting] = rate, counts["contradicted"] / n_exp
        if per_row:
            name, count = per_row.most_common(1)[0]
            worst_row = max(worst_row, (count / n_exp, name, setting), key=lambda t: t[0])
    return {"rates": rates, "contradicted": contra, "worst_row": worst_row}


def power(d: Design, n_exp: int, seed: int, dataset: str = "math500") -> dict[str, float]:
    """Share of refine-vs-BASELINE rows on `dataset` read 'supported' with refine +EFFECT."""
    rng = np.random.default_rng([seed, 99])
    hits, total = Counter(), Counter()
    for _ in range(n_exp):
        rows = d.adjust(simulate_rows(d, rng, (0.4, 2.0), planted={("refine", dataset): EFFECT}))
        for r in rows:
            main = r["method"] == "refine" and r["baseline"] in POWER_ROWS and " vs " not in r["model"]
            if main and r["dataset"] == dataset:
                total[r["baseline"]] += 1
                hits[r["baseline"]] += r["verdict"] == "supported"
    return {b: hits[b] / total[b] for b in POWER_ROWS if total[b]}


def mc_error(p: float, n: int) -> float:
    """One standard error of a share p over n simulated experiments."""
    return float(np.sqrt(max(p * (1 - p), 1 / n) / n))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiments", type=int, default=150, help="null experiments per setting")
    ap.add_argument("--power-experiments", type=int, default=200)  # 800 rows: +-0.01 at 0.93
    ap.add_argument("--only", nargs="+", default=list(EXPERIMENTS), help="experiments to calibrate")
    ap.add_argument("--mirror", default=None, help="benchmark mirror (default: $RETRACE_MIRROR or config)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for name in a.only:
        try:
            t0, d = time.perf_counter(), design(name, a.mirror)
        except (ValueError, OSError) as e:
            print(f"claims_calibration: {name}: {e}", file=sys.stderr)
            return 2
        print_experiment(name, d, a, t0)
    return 0


def print_experiment(name: str, d: Design, a: argparse.Namespace, t0: float) -> None:
    """Every stdout line of one experiment (module docstring); details on stderr."""
    out = calibrate(d, a.experiments, a.seed)
    rates = out["rates"]
    print(
        f"{name}: {d.n_rows} claim rows, {a.experiments} null experiments x {len(SETTINGS)} settings "
        f"in {time.perf_counter() - t0:.0f} s; rate per (accuracy, concentration): "
        + ", ".join(f"{k}: {v:.3f}" for k, v in rates.items()),
        file=sys.stderr,
    )
    print(f"null family false-supported rate ({name}): {max(rates.values()):.4f}")
    print(f"null family false-contradicted rate ({name}): {max(out['contradicted'].values()):.4f}")
    rate, row, setting = out["worst_row"]
    print(f"largest per-row false-supported rate ({name}): {rate:.4f} ({row or 'none'}, {setting})")
    if name == "paper":
        print(f"null false-supported rate: {np.mean(list(rates.values())):.4f}")
        pw = power(d, a.power_experiments, a.seed)
        rows = a.power_experiments * sum(ds == "math500" for _, ds in d.cells)  # a row per model, run
        err = lambda v: f"{v:.3f} +- {mc_error(v, rows):.3f}"
        print(f"power at +10 points, 500 questions: {err(pw['majority'])}")
        for b, v in pw.items():
            print(f"power at +10 points, 500 questions (refine vs {b}): {err(v)}")
    print(f"power ({name}): {rehearsal_power(d, a.seed)}")


def rehearsal_power(d: Design, seed: int) -> str:
    """`retrace rehearse`'s power summary line for the design (rehearse.power, its Monte-Carlo
    error <= rehearse.MC_ERROR), on the default effects or, where they plant none of the
    design's rows, +10 points on each row's method."""
    from retrace.app import rehearse
    from retrace.scoring.design import truth

    plant = rehearse.planted(d, rehearse.EFFECTS)
    if not any(truth(row, plant) for row in d.rows):
        plant = rehearse.default_plant(d)
    powers, runs, error = rehearse.power(d, plant, None, seed)
    lines: list[str] = []
    rehearse.print_power(d, powers, runs, lines.append, error)
    return lines[-1]


if __name__ == "__main__":
    sys.exit(main())
