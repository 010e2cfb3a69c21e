"""Paired comparisons of two methods scored on the same questions, and their correction.

- `paired_bootstrap_diff`: percentile bootstrap CI of mean(a) - mean(b), resampling
  questions jointly so each replicate keeps the pairing (Efron & Tibshirani 1993, ch. 13).
  The mean of a resample depends only on how often each distinct difference is drawn, so
  replicates are drawn as multinomial counts over the distinct values: the same bootstrap
  distribution as resampling indices, at a cost independent of the number of questions.
- `binomial_two_sided` / `mcnemar_exact`: the exact two-sided binomial test with p = 0.5
  (scipy.stats.binomtest); on the discordant pairs of 0/1 outcomes it is the exact McNemar
  test (McNemar 1947), on the non-zero per-question differences the sign test.
- `sign_flip_exact`: the paired randomisation (sign-flip) test of mean(d) = 0 on per-question
  differences d (Fisher 1935, ch. 21; Good 2005, "Permutation, Parametric and Bootstrap Tests
  of Hypotheses", 3.1): under the null each question's difference is as likely +|d| as -|d|,
  so the sum's null distribution is that of sum eps_i |d_i| over all 2^n sign patterns. It
  tests the MEAN (not the median, as the sign test does), so it stays valid when the two
  sides average different numbers of seeds. Exact: the |d| lie on a lattice (seed means are
  multiples of 1/seeds), so the null distribution is a convolution of scaled binomials.
  With one seed a side (|d| = 1 on the discordant pairs) it is the exact McNemar test.
- `stratified_exact`: for 0/1 scores, exact for any seed counts under the null that on each
  question every draw of either method has one success probability; given a question's
  total successes c, A's share of them is hypergeometric, and A's total is their convolution
  (the stratified conditional test of Cochran 1954 / Mantel-Haenszel, per-question strata;
  with one seed a side it is the exact McNemar test). Two-sided: the smaller tail, doubled.
  Its null is narrower than "equal mean accuracy": where the two methods solve different
  questions (a method x question interaction) it rejects too often, so scoring.claims uses
  it only beside the sign-flip test, never alone (scoring.claims.seeds_test says why).
- `sign_flip_ci`: the shifts delta that the sign-flip test, its randomisation distribution
  taken as NORMAL, does not reject at `level` (closed form). An approximation of the exact
  test's inversion, not the inversion itself: the two disagree on some rows near the edge.
- `paired_mean_ci`: the CI claims.csv reports (`ci_method`): `sign_flip_ci` on the
  differences with Agresti-Min pseudo-pairs added (Agresti & Min 2005, "Simple improved
  confidence intervals for comparing matched proportions", Stat. Med. 24: half a pair each
  way, +1 and -1, and one tie), scaled to the score's range (+-r for scores spanning r: FS(3)
  differences reach +-4, ART's task-weighted rows +-w), so that the interval is in the score's
  units and is the same, relative to the differences, whatever they are. The exact inversion,
  and the unadjusted normal one, have zero width when every difference is equal (all ties, or
  every question won); with the pseudo-pairs the width is never zero (n >= 1), and the centre
  moves towards 0 by a factor n / (n + 2).
- `holm`: Holm's (1979) step-down adjusted p-values, which control the family-wise error
  rate over a family of tests under any dependence between them; `holm_levels` the level
  each test is judged at in the step-down (alpha / (m - rank)).

    holm([0.01, 0.04, 0.03])  ->  [0.03, 0.06, 0.06]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrace.scoring.metrics import DEFAULT_BOOT, DEFAULT_LEVEL, DEFAULT_SEED, percentile_interval


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


def lattice_scale(d: np.ndarray, max_scale: int = 2520) -> int | None:
    """Smallest L <= max_scale with every d * L an integer (seed means: L = product of seed counts)."""
    d = np.unique(np.abs(np.asarray(d, dtype=float)))  # a few distinct values, however many questions
    for scale in range(1, max_scale + 1):
        x = d * scale
        if np.all(np.abs(x - np.rint(x)) < 1e-6):
            return scale
    return None


def _binomial_half_pmf(c: int) -> np.ndarray:
    """P(K = k), k = 0..c, for K ~ Bin(c, 1/2), from log-gamma (exact to float precision)."""
    from scipy.special import gammaln

    k = np.arange(c + 1)
    return np.exp(gammaln(c + 1) - gammaln(k + 1) - gammaln(c - k + 1) - c * np.log(2.0))


def _convolve(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Full convolution; by FFT (numpy's own, clipped at 0 for its rounding, ~1e-17 of the
    largest mass: tails below that read as rounding noise, never as a p-value that matters) when long."""
    if len(x) * len(y) <= 1_000_000:
        return np.convolve(x, y)
    from scipy.fft import next_fast_len

    size = len(x) + len(y) - 1
    fast = next_fast_len(size, real=True)  # pocketfft on an awkward length is many times slower
    out = np.fft.irfft(np.fft.rfft(x, fast) * np.fft.rfft(y, fast), fast)[:size]
    return np.clip(out, 0.0, None)


def _sign_flip_pmf(steps: np.ndarray) -> np.ndarray:
    """Null pmf of sum eps_i * steps_i (integers > 0), indexed from -sum(steps) to +sum(steps)."""
    pmf = np.ones(1)
    values, counts = np.unique(steps, return_counts=True)
    for v, c in zip(values.tolist(), counts.tolist()):
        kernel = np.zeros(2 * c * v + 1)  # c signs of value v: v * (2k - c), k ~ Bin(c, 1/2)
        kernel[:: 2 * v] = _binomial_half_pmf(c)
        pmf = _convolve(pmf, kernel)
    return pmf


def sign_flip_exact(d: Sequence[float], n_flips: int = 200_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip test of mean(d) = 0 (see module docstring).

    Exact when the differences lie on a lattice (always, for means over seeds); otherwise
    `n_flips` random sign patterns with the (1 + hits) / (1 + n_flips) correction.
    """
    x = np.asarray(d, dtype=float)
    x = x[x != 0]
    if x.size == 0:
        return 1.0
    scale = lattice_scale(x)
    if scale is None:
        rng = np.random.default_rng(seed)
        obs, hits = abs(x.sum()), 0
        for start in range(0, n_flips, 4096):
            eps = rng.choice((-1.0, 1.0), size=(min(4096, n_flips - start), x.size))
            hits += int(np.sum(np.abs(eps @ np.abs(x)) >= obs - 1e-12))
        return (1 + hits) / (1 + n_flips)
    signed = np.rint(x * scale).astype(int)  # float noise (a mean of thirds minus another) drops out
    steps = np.abs(signed[signed != 0])
    if steps.size == 0:
        return 1.0
    total, obs = int(steps.sum()), abs(int(signed.sum()))
    pmf = _sign_flip_pmf(steps)
    tail = pmf[: total - obs + 1].sum() + pmf[total + obs :].sum() if obs else 1.0
    return float(min(1.0, tail))


EDGEWORTH_MIN = 100  # off-lattice differences: the Edgeworth approximation from this many on
MAX_LATTICE_SUM = 200_000  # the exact null pmf's half-length beyond which it is not computed


def sign_flip_edgeworth(d: Sequence[float]) -> float:
    """Two-sided p of the sign-flip test from its randomisation distribution's first cumulants:
    S = sum eps_i |d_i| is symmetric (odd cumulants 0), k2 = sum d^2, k4 = -2 sum d^4; the
    Edgeworth series to the k4 term (Hall 1992, "The Bootstrap and Edgeworth Expansion", 2.2).
    For differences off any small lattice (ART's task-weighted scores), where the exact
    convolution is out of reach and Monte-Carlo sign patterns are slow and noisy in the tail;
    its error is O(1/n), tested against the exact test in tests/unit/test_claims_seeds.py."""
    from scipy.special import ndtr

    x = np.asarray(d, dtype=float)
    k2, k4 = float(np.sum(x * x)), -2.0 * float(np.sum(x**4))
    if k2 == 0:
        return 1.0
    z = abs(float(x.sum())) / np.sqrt(k2)
    phi = np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
    upper = (1 - ndtr(z)) + phi * k4 / (24 * k2 * k2) * (z**3 - 3 * z)
    return float(min(1.0, max(0.0, 2 * upper)))


def sign_flip_test(d: Sequence[float]) -> tuple[float, str]:
    """(p, name): the exact sign-flip test where the differences lie on a lattice (seed means
    always do), the Edgeworth approximation for EDGEWORTH_MIN or more off-lattice differences,
    Monte-Carlo sign patterns below that."""
    x = np.asarray(d, dtype=float)
    x = x[x != 0]
    scale = lattice_scale(x) if x.size else 1
    # a lattice too fine for the convolution (ART's task weights: steps summing to millions)
    wide = scale is None or float(np.abs(x).sum()) * scale > MAX_LATTICE_SUM
    if x.size >= EDGEWORTH_MIN and wide:
        return sign_flip_edgeworth(x), "sign_flip_edgeworth"
    return sign_flip_exact(x), "sign_flip_exact" if scale else "sign_flip_monte_carlo"


def _pmf_power(q: np.ndarray, count: int) -> np.ndarray:
    """The pmf of a sum of `count` independent draws from pmf `q` (repeated squaring)."""
    out, base = np.array([1.0]), q
    while count:
        if count & 1:
            out = np.convolve(out, base)
        count >>= 1
        if count:
            base = np.convolve(base, base)
    return out


def stratified_exact(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the exact conditional test that on every question all draws of
    A and B (0/1 scores, seeds x questions) share one success probability (see module docstring)."""
    from math import comb

    ka, kb = len(a), len(b)
    total = (np.asarray(a).sum(axis=0) + np.asarray(b).sum(axis=0)).astype(int)
    observed, offset, pmf = int(np.asarray(a).sum()), 0, np.array([1.0])
    values, counts = np.unique(total, return_counts=True)
    for c, count in zip(values.tolist(), counts.tolist(), strict=True):
        lo, hi = max(0, c - kb), min(ka, c)  # A's successes on a question with c in all
        q = np.array([comb(c, x) * comb(ka + kb - c, ka - x) for x in range(lo, hi + 1)], dtype=float)
        pmf = np.convolve(pmf, _pmf_power(q / q.sum(), count))
        offset += lo * count
    k = observed - offset
    tail = min(pmf[: k + 1].sum(), pmf[k:].sum())  # the smaller tail, doubled
    return float(min(1.0, 2 * tail))


def sign_flip_ci(diff_mean: float, diff_sd: float, n: int, level: float) -> tuple[float, float]:
    """CI of the mean difference inverted from the sign-flip test at `level`.

    A shift delta is kept while n^2 (mean - delta)^2 < z^2 sum (d_i - delta)^2 (the
    randomisation variance of the shifted sum), i.e. |mean - delta| < z sd / sqrt(n - z^2),
    with sd the population sd of the differences; unbounded when n <= z^2.
    """
    from scipy.special import ndtri  # the normal quantile, without importing scipy.stats

    z = float(ndtri(0.5 + level / 2))
    if n <= z * z:
        return float("-inf"), float("inf")
    half = z * diff_sd / np.sqrt(n - z * z)
    return float(diff_mean - half), float(diff_mean + half)


def paired_mean_ci(
    diff_mean: float, diff_sd: float, n: int, level: float, scale: float = 1.0
) -> tuple[float, float]:
    """`sign_flip_ci` of n differences (mean `diff_mean`, population sd `diff_sd`) with the
    Agresti-Min pseudo-pairs added: +scale and -scale at weight 1/2 each, 0 at weight 1
    (module docstring). `scale` is the score's range (1 for 0/1 scores, 1 + k for FS(k)), so
    the interval of c * d is c times that of d: it does not depend on the score's units.
    Recomputable from claims.csv's delta, sd_diff, n_questions and score_range alone."""
    if n < 1:
        return float("-inf"), float("inf")
    n2 = n + 2
    mean2 = n * diff_mean / n2
    var2 = (n * (diff_sd * diff_sd + diff_mean * diff_mean) + scale * scale) / n2 - mean2 * mean2
    return sign_flip_ci(mean2, float(np.sqrt(max(var2, 0.0))), n2, level)


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """The level each test meets in Holm's step-down: alpha / (m - rank), rank 0 the smallest p."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    out = np.empty(len(p))
    out[order] = alpha / (len(p) - np.arange(len(p)))
    return [float(v) for v in out]


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
