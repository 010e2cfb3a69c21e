"""Per-problem metrics (accuracy, maj@k, pass@k) and bootstrap confidence intervals.

Sample once, score many: maj@k is the vote over the FIRST k of the N stored samples for
k = 1, 2, 4, ... N, as search-and-learn does from one sample set
(https://github.com/huggingface/search-and-learn, src/sal/utils/score.py). Taking the first
k rather than a random subset keeps maj@k nested: maj@2 uses samples that maj@4 also uses.

pass@k uses all N samples through the unbiased estimator of Chen et al. 2021, "Evaluating
Large Language Models Trained on Code" (https://arxiv.org/abs/2107.03374), eq. 1:
    pass@k = 1 - C(n - c, k) / C(n, k)
for n samples of which c are correct.

Confidence intervals are percentile bootstraps over problems (Efron & Tibshirani 1993,
ch. 13) with a fixed seed, so the same scores give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrace.scoring.vote import SameAnswer, plurality_index

DEFAULT_BOOT = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
_CHUNK = 256  # bootstrap replicates drawn at a time, to bound memory on large datasets


def ks_for(n: int) -> list[int]:
    """k = 1, 2, 4, ... up to n, plus n itself when n is not a power of two."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if n >= 1 and ks[-1] != n:
        ks.append(n)
    return ks


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021, eq. 1)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    # The product form from the paper's numpy snippet avoids huge binomial coefficients.
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def maj_at_k_correct(
    answers: Sequence[str | None], correct: Sequence[bool], k: int, same_answer: SameAnswer
) -> bool:
    """Whether the plurality vote over the first k answers is correct."""
    idx = plurality_index(answers[:k], same_answer)
    return idx is not None and bool(correct[idx])


def accuracy(flags: Sequence[bool | float]) -> float:
    """Mean of per-problem scores (0/1 flags or fractional values)."""
    if len(flags) == 0:
        raise ValueError("accuracy of zero problems is undefined")
    return float(np.mean(np.asarray(flags, dtype=float)))


def bootstrap_means(
    values: Sequence[float], n_boot: int = DEFAULT_BOOT, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """Means of `n_boot` resamples (with replacement) of the per-problem values."""
    vals = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    for start in range(0, n_boot, _CHUNK):
        stop = min(start + _CHUNK, n_boot)
        idx = rng.integers(0, len(vals), size=(stop - start, len(vals)))
        out[start:stop] = vals[idx].mean(axis=1)
    return out


def percentile_interval(stats: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(stats, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def estimate(
    values: Sequence[float],
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
) -> dict:
    """{"value", "ci_low", "ci_high"}: the mean over problems and its bootstrap interval."""
    value = accuracy(values)
    low, high = percentile_interval(bootstrap_means(values, n_boot, seed), level)
    return {"value": value, "ci_low": low, "ci_high": high}
