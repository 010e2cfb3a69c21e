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
settings (ART: each task's test items after its held-out pool, task-averaged rows with their
pooled twins, as art/summary.py writes them). Per-question outcomes are simulated under the
null (every method of a cell has the same average accuracy, so every "supported" and every
"contradicted" verdict is false; a non-inferiority row, "A does not beat B" with a margin,
should read "supported" there, and only its "contradicted" is false) and fed to the real
claims code (scoring.claims compare_matrices, then adjust: sign-flip and stratified exact
tests, CI, Holm over the experiment's families). Rows that cannot be significant skip the
exact test (scoring.design._screened: verdicts unchanged, tested), for speed.

The null sweeps base accuracy (near 0, mid, near 1) and difficulty dispersion (questions all
alike vs many near 0 or 1: Beta concentration 50 or 1), and, on the dispersed settings, a
method x question interaction: each method's per-question success probabilities drawn apart
(strength 1: no question difficulty shared between methods, beyond any real pair of methods;
equal average accuracy, different questions solved). The smallest datasets (AIME, 30
questions; the smoke's 10) are in every family.

Each setting runs null experiments up to the first of LOOKS (200, 400, ... 6,000) at which the
exact (Clopper-Pearson) upper bound of its "any false verdict" rate, at the level corrected
for the nine looks (0.05 / 9, two-sided), is <= 0.05 (a true rate of 0.01 stops at 200, 0.02 at
400, 0.03 at 1,000), or 6,000 ran (`--experiments N`: exactly N, no stop). A family whose rows
are nearly independent spends almost all of Holm's 0.05 (art_paper at mid accuracy with the
strongest interaction: 0.0425); its plain bound first falls below 0.05 near 4,000 experiments. The printed bound is
the plain 95 % one; the correction keeps it honest despite the looks.
Prints on stdout, per experiment, over each rate's worst setting (the largest upper bound):

    EXPERIMENT: false supported X (upper U), false contradicted X (upper U), any false X (upper U)
        X the share of null experiments with at least one such verdict, U its exact 95 %
        upper bound (two-sided Clopper-Pearson); Holm's guarantee is on any false verdict
    null experiments (EXPERIMENT): N over S settings (each: K to M)
    power at +10 points, 500 questions: P +- E         "beats Maj@N" on MATH-500 with refine
        planted 10 points above every other method (mid accuracy, Beta(0.8, 1.2) difficulty);
        E its Monte-Carlo error (one standard error)
    power at +10 points, 500 questions (refine vs BASELINE): P +- E   the other main rows
    power (EXPERIMENT): planted effects detected with power >= 0.9 at full n: A/B (N runs
        each; Monte-Carlo error <= E)   `retrace rehearse`'s power statement: the effects of
        config/rehearse/effects.yaml (+10 points on each row's method where they plant none
        of the experiment's rows, as for refine_smoke), runs until E <= 0.03

Details (rates per setting, rows per family, timings) go to stderr. A design that cannot be
built (a dataset config without `questions:`, or one the mirror contradicts) is one line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

import numpy as np

from retrace.scoring.claims import row_margin
from retrace.scoring.design import Design, design, simulate_rows
from retrace.scoring.verdicts import true_verdict

EXPERIMENTS = ("paper", "drr_paper", "art_paper", "refine_smoke")
# (base accuracy, Beta concentration, interaction): near 0 / mid / near 1, each homogeneous and
# dispersed; the dispersed ones again with every method's difficulties its own
SETTINGS = [(mu, conc, 0.0) for mu in (0.05, 0.5, 0.95) for conc in (50.0, 1.0)]
SETTINGS += [(mu, 1.0, 1.0) for mu in (0.05, 0.5, 0.95)]
EFFECT = 0.10
POWER_ROWS = ("majority", "greedy", "majority_eq", "majority_eq_nominal")
LOOKS = (200, 400, 700, 1000, 1500, 2000, 3000, 4500, 6000)  # experiments at which a setting may stop
MAX_EXPERIMENTS = LOOKS[-1]
BOUND = 0.05  # the goal: every rate's exact upper bound <= 0.05
KINDS = ("supported", "contradicted", "any")


def upper(k: int, n: int, level: float = 0.95) -> float:
    """Exact two-sided Clopper-Pearson upper bound of a share k/n at `level`."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(1 - (1 - level) / 2, k + 1, n - k))


def false_rows(rows: list[dict]) -> list[dict]:
    """The rows of a null experiment whose verdict is false against its truth (0: every method
    alike; a non-inferiority row should read "supported" there, scoring.verdicts.true_verdict)."""
    return [
        r
        for r in rows
        if r["verdict"] != "inconclusive"
        and r["verdict"] != true_verdict(r.get("direction") or "greater", row_margin(r), 0.0)
    ]


def null_family(
    d: Design, rng, setting, n_exp: int, counts: Counter | None = None, screen: bool = True
) -> tuple[float, Counter]:
    """(share of experiments with a false 'supported', false verdicts per row name); `counts`
    gains the experiments with each kind of false verdict (KINDS) and "n"."""
    counts = Counter() if counts is None else counts
    hits, per_row = 0, Counter()
    for _ in range(n_exp):
        bad = false_rows(d.adjust(simulate_rows(d, rng, setting, screen=screen)))
        kinds = {r["verdict"] for r in bad} | ({"any"} if bad else set())
        hits += "supported" in kinds
        counts.update(kinds | {"n"})
        per_row.update(
            f"{r['claim']} / {r['model']} / {r['dataset']}" for r in bad if r["verdict"] == "supported"
        )
    return hits / n_exp, per_row


def run_setting(d: Design, setting, rng, fixed: int | None) -> Counter:
    """Null experiments of one setting: exactly `fixed`, or batches until the look-corrected
    upper bound of "any false" is <= BOUND (at most MAX_EXPERIMENTS)."""
    counts: Counter = Counter()
    for look in (fixed,) if fixed else LOOKS:
        null_family(d, rng, setting, look - counts["n"], counts)
        if not fixed and upper(counts["any"], counts["n"], 1 - 0.05 / len(LOOKS)) <= BOUND:
            break
    return counts


def calibrate(d: Design, fixed: int | None, seed: int) -> dict:
    """{setting: Counter of false verdicts and experiments} over SETTINGS."""
    return {s: run_setting(d, s, np.random.default_rng([seed, i]), fixed) for i, s in enumerate(SETTINGS)}


def worst(out: dict, kind: str) -> tuple[float, float, tuple]:
    """(rate, exact upper bound, setting) of `kind` at the setting with the largest bound."""
    return max(((c[kind] / c["n"], upper(c[kind], c["n"]), s) for s, c in out.items()), key=lambda t: t[1])


def power(d: Design, n_exp: int, seed: int, dataset: str = "math500") -> dict[str, float]:
    """Share of refine-vs-BASELINE rows on `dataset` read 'supported' with refine +EFFECT."""
    rng = np.random.default_rng([seed, 99])
    hits, total = Counter(), Counter()
    for _ in range(n_exp):
        rows = d.adjust(simulate_rows(d, rng, (0.4, 2.0), {("refine", dataset): EFFECT}, screen=True))
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
    ap.add_argument(
        "--experiments", type=int, default=None, help="null experiments per setting (default: sequential)"
    )
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
    for s, c in out.items():
        rates = ", ".join(f"{k} {c[k] / c['n']:.4f}" for k in KINDS)
        print(f"{name} {s}: {c['n']} null experiments: {rates}", file=sys.stderr)
    print(f"{name}: {d.n_rows} claim rows, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    parts = []
    for kind, label in zip(KINDS, ("false supported", "false contradicted", "any false"), strict=True):
        rate, bound, _ = worst(out, kind)
        parts.append(f"{label} {rate:.4f} (upper {bound:.4f})")
    print(f"{name}: {', '.join(parts)}")
    ns = [c["n"] for c in out.values()]
    print(f"null experiments ({name}): {sum(ns)} over {len(ns)} settings (each: {min(ns)} to {max(ns)})")
    if name == "paper":
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
