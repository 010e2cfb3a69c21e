"""Paired comparisons of two methods scored on the same questions.

- `paired_bootstrap_diff`: percentile bootstrap CI of mean(a) - mean(b), resampling
  questions jointly so each replicate keeps the pairing (Efron & Tibshirani 1993, ch. 13).
- `mcnemar_exact`: exact McNemar test (McNemar 1947), i.e. a two-sided binomial test
  with p = 0.5 on the discordant pairs; concordant pairs carry no information.

Neither corrects for multiple comparisons; a caller comparing many pairs must.
"""
from __future__ import annotations

from math import comb
from typing import Sequence

import numpy as np

from retrace.scoring.metrics import (DEFAULT_BOOT, DEFAULT_LEVEL, DEFAULT_SEED, bootstrap_means,
                                     percentile_interval)



def _paired_arrays(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"paired scores need two equal-length non-empty lists, got "
                         f"{x.shape} and {y.shape}")
    return x, y


def paired_bootstrap_diff(a: Sequence[float], b: Sequence[float], n_boot: int = DEFAULT_BOOT,
                          seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL) -> dict:
    """{"diff", "ci_low", "ci_high"} for mean(a) - mean(b); a[i], b[i] score question i."""
    x, y = _paired_arrays(a, b)
    d = x - y  # resampling per-question differences resamples both methods jointly
    means = bootstrap_means(d, n_boot, seed)
    low, high = percentile_interval(means, level)
    return {"diff": float(d.mean()), "ci_low": low, "ci_high": high}


def binomial_two_sided(k: int, n: int) -> float:
    """Two-sided exact p-value of k successes in n fair coin flips (doubling the smaller tail)."""
    if n == 0:
        return 1.0
    m = min(k, n - k)
    # Exact integers, then one division: no underflow of 0.5**n for large n.
    tail = sum(comb(n, i) for i in range(m + 1))
    return min(1.0, 2 * tail / 2 ** n)


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> dict:
    """{"a_only", "b_only", "p_value"}: discordant counts and the exact McNemar p-value."""
    x, y = _paired_arrays(a, b)
    x, y = x.astype(bool), y.astype(bool)
    a_only, b_only = int(np.sum(x & ~y)), int(np.sum(~x & y))
    return {"a_only": a_only, "b_only": b_only,
            "p_value": binomial_two_sided(a_only, a_only + b_only)}
