"""Calibration of the claims engine on simulated per-question outcomes with known truth.

    .venv/bin/python benchmarks/claims_calibration.py            # or: make calibrate
    .venv/bin/python benchmarks/claims_calibration.py --experiments 200 --n-boot 500

Feeds the real claims code (retrace.stages.claims.claim_rows, then
retrace.scoring.claims.adjust: CI + exact test + Holm over the experiment) with simulated
score records shaped like the refinement paper's grid (config/experiment/paper.yaml: 4 models
x AIME24/AIME25/AMC23/OlympiadBench/MATH500 with their question counts x every method label
x 3 seeds), and prints exactly two lines on stdout:

    null false-supported rate: X      share of null experiments with at least one "supported"
                                      row (family-wise; all methods identical, so every
                                      "supported" is false). Must be <= 0.05.
    power at +10 points, 500 questions: Y
                                      share of "refinement beats Maj@N" rows on the
                                      500-question set that read "supported" when refinement's
                                      accuracy is planted 10 points above every other method's
                                      (everything else null, same family).

How outcomes are drawn: each (model, dataset) gets per-question success probabilities from
a Beta(0.8, 1.2) (hard benchmarks: mean 0.4, many near 0 or 1, as on AIME/MATH); every method
label and seed then draws independent Bernoulli outcomes from the same probabilities (so
methods are identical: the null). The planted effect raises refinement's probability of
question q to p_q + c (1 - p_q), with c chosen so the mean rises by exactly 0.10.
Experiments are split over several simulation seeds (--sim-seeds). Details go to stderr.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from retrace.scoring.claims import PAPER_CLAIMS, adjust
from retrace.stages.claims import claim_rows

PAPER_DATASETS = {"aime24": 30, "aime25": 30, "amc23": 40, "olympiadbench": 675, "math500": 500}
PAPER_MODELS = ("qwen2.5-1.5b-instruct", "qwen2.5-math-7b", "llama-3.1-8b-instruct", "ministral-8b-instruct")
SEEDS = 3
EFFECT = 0.10
POWER_DATASET = "math500"


def labels() -> list[str]:
    return sorted({lab for claim in PAPER_CLAIMS for lab in claim[1:3]})


def simulate(rng, models, datasets: dict, effect: dict | None = None) -> tuple[dict, dict]:
    """(runs, flops) in the claims stage's shapes; effect[(model, dataset)] plants +EFFECT for refine."""
    runs, flops = {}, {}
    for model in models:
        for dataset, n in datasets.items():
            p = rng.beta(0.8, 1.2, size=n)
            ids = [f"q{i:04d}" for i in range(n)]
            cell = runs.setdefault((model, "sim", dataset), {})
            for label in labels():
                prob = p
                if label == "refine" and effect and (model, dataset) in effect:
                    c = effect[(model, dataset)] / max(1e-9, 1.0 - p.mean())
                    prob = p + c * (1.0 - p)
                draws = rng.random((SEEDS, n)) < prob
                cell[label] = [(dict(zip(ids, map(float, row))), "sim") for row in draws]
                flops[(model, "sim", dataset, label)] = [1e15] * SEEDS
    return runs, flops


def experiment(rng, models, datasets, n_boot: int, effect=None) -> list[dict]:
    weaker = list(zip(models, models[1:]))  # pre-registered pairs, as an experiment file lists them
    rows = claim_rows(*simulate(rng, models, datasets, effect), weaker=weaker, n_boot=n_boot)
    return adjust(rows)


def null_rate(n_exp: int, sim_seeds, models, datasets, n_boot: int) -> tuple[float, int]:
    """(family-wise false-supported rate, rows per experiment)."""
    hits, n_rows = 0, 0
    per_seed = max(1, n_exp // len(sim_seeds))
    for s in sim_seeds:
        rng = np.random.default_rng(s)
        for _ in range(per_seed):
            rows = experiment(rng, models, datasets, n_boot)
            n_rows = len(rows)
            hits += any(r["verdict"] == "supported" for r in rows)
    return hits / (per_seed * len(sim_seeds)), n_rows


def power(n_exp: int, sim_seeds, models, datasets, n_boot: int, dataset: str = POWER_DATASET) -> float:
    """Share of planted 'beats Maj@N' rows on `dataset` that read supported."""
    effect = {(m, dataset): EFFECT for m in models}
    supported, total = 0, 0
    per_seed = max(1, n_exp // len(sim_seeds))
    for s in sim_seeds:
        rng = np.random.default_rng(10_000 + s)
        for _ in range(per_seed):
            for r in experiment(rng, models, datasets, n_boot, effect):
                if (r["claim"], r["dataset"]) == ("beats Maj@N", dataset):
                    supported += r["verdict"] == "supported"
                    total += 1
    return supported / total


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiments", type=int, default=2000, help="null experiments (>= 2000 for the claim)")
    ap.add_argument("--power-experiments", type=int, default=100)
    ap.add_argument("--sim-seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates per row")
    a = ap.parse_args(argv)
    rate, n_rows = null_rate(a.experiments, a.sim_seeds, PAPER_MODELS, PAPER_DATASETS, a.n_boot)
    print(
        f"{a.experiments} null experiments x {n_rows} claim rows, sim seeds {a.sim_seeds}, n_boot {a.n_boot}",
        file=sys.stderr,
    )
    print(f"null false-supported rate: {rate:.4f}")
    pw = power(a.power_experiments, a.sim_seeds, PAPER_MODELS, PAPER_DATASETS, a.n_boot)
    print(f"power at +10 points, 500 questions: {pw:.3f}")


if __name__ == "__main__":
    main()
