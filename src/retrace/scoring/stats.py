"""Paired comparisons of two methods scored on the same questions, and their correction.

- `paired_bootstrap_diff`: percentile bootstrap CI of mean(a) - mean(b), resampling
  questions jointly so each replicate keeps the pairing (Efron & Tibshirani 1993, ch. 13).
  The mean of a resample depends only on how often each distinct difference is drawn, so
  replicates are drawn as multinomial counts over the distinct values: the same bootstrap
  distribution as resampling indices, at a cost independent of the number of questions.
- `binomial_two_sided` / `mcnemar_exact`: the exact two-sided binomial test with p = 0.5
  (scipy.stats.binomtest); on the discordant pairs of 0/1 outcomes it is the exact McNemar
  test (McNemar 1947), on the non-zero per-question differences the sign test.
- `holm`: Holm's (1979) step-down adjusted p-values, which control the family-wise error
  rate over a family of tests under any dependence between them.

    holm([0.01, 0.04, 0.03])  ->  [0.03, 0.06, 0.06]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from retrace.scoring.metrics import DEFAULT_BOOT, DEFAULT_LEVEL, DEFAULT_SEED, percentile_interval

CORRECTIONS = ("holm",)


def _paired_arrays(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"paired scores need two equal-length non-empty lists, got {x.shape} and {y.shape}")
    return x, y


def bootstrap_means_by_counts(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Means of `n_boot` resamples of `values`, drawn as multinomial counts of its distinct values.

    The multinomial is drawn as a chain of binomials (count of value j given the draws left
    for values j..K), vectorised over replicates: the same distribution, K numpy calls.
    """
    uniq, counts = np.unique(values, return_counts=True)
    rng = np.random.default_rng(seed)
    n = len(values)
    left, mass_left = np.full(n_boot, n), float(n)
    total = np.zeros(n_boot)
    for u, c in zip(uniq[:-1], counts[:-1]):
        drawn = rng.binomial(left, min(1.0, c / mass_left))
        total += drawn * u
        left, mass_left = left - drawn, mass_left - c
    return (total + left * uniq[-1]) / n


def paired_bootstrap_diff(
    a: Sequence[float],
    b: Sequence[float],
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> dict:
    """{"diff", "ci_low", "ci_high"} for mean(a) - mean(b); a[i], b[i] score question i."""
    x, y = _paired_arrays(a, b)
    d = x - y  # resampling per-question differences resamples both methods jointly
    means = bootstrap_means_by_counts(d, n_boot, seed)
    low, high = percentile_interval(means, level)
    return {"diff": float(d.mean()), "ci_low": low, "ci_high": high}


def binomial_two_sided(k: int, n: int) -> float:
    """Exact two-sided p-value of k successes in n fair coin flips.

    With p = 0.5 the binomial is symmetric, so scipy.stats.binomtest's two-sided p-value is
    twice the smaller tail; computed here from scipy.stats.binom.cdf directly (the same number,
    tested against binomtest, without its root search: the calibration calls this ~10^6 times).
    """
    if n == 0:
        return 1.0
    from scipy.stats import binom

    return float(min(1.0, 2.0 * binom.cdf(min(k, n - k), n, 0.5)))


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """{"a_only", "b_only", "p_value"}: discordant counts and the exact McNemar p-value."""
    x, y = _paired_arrays(a, b)
    x, y = x.astype(bool), y.astype(bool)
    a_only, b_only = int(np.sum(x & ~y)), int(np.sum(~x & y))
    return {"a_only": a_only, "b_only": b_only, "p_value": binomial_two_sided(a_only, a_only + b_only)}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order: reject test i at level alpha iff adj[i] <= alpha.

    Sorted ascending, the j-th smallest (0-based) gets max over k <= j of min(1, (m - k) p_(k))
    (Holm 1979, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6).
    """
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return []
    if np.any((p < 0) | (p > 1) | np.isnan(p)):
        raise ValueError(f"p-values must lie in [0, 1], got {p[(p < 0) | (p > 1) | np.isnan(p)][:3]}")
    order = np.argsort(p, kind="stable")
    m = len(p)
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return [float(v) for v in out]
