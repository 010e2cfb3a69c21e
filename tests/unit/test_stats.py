"""Paired bootstrap of a difference, and the exact McNemar test."""

import numpy as np
import pytest

from retrace.scoring.stats import (
    binomial_two_sided,
    holm,
    holm_levels,
    mcnemar_exact,
    paired_bootstrap_diff,
    sign_flip_ci,
    sign_flip_exact,
)


def test_mcnemar_known_p_values():
    # 0 vs 5 discordant: 2 * 0.5**5
    assert mcnemar_exact([True] * 5, [False] * 5)["p_value"] == pytest.approx(0.0625)
    # 1 vs 9 discordant: 2 * (1 + 10) / 1024 (matches statsmodels mcnemar(exact=True))
    a = [True] * 1 + [False] * 9 + [True] * 20
    b = [False] * 1 + [True] * 9 + [True] * 20
    res = mcnemar_exact(a, b)
    assert (res["a_only"], res["b_only"]) == (1, 9)
    assert res["p_value"] == pytest.approx(0.021484375)


def test_mcnemar_no_discordant_pairs_is_p_one():
    assert mcnemar_exact([True, False], [True, False])["p_value"] == 1.0


def test_mcnemar_symmetric_balanced_is_p_one():
    assert binomial_two_sided(5, 10) == 1.0  # doubled tail capped at 1


def test_binomial_large_n_is_exact_not_an_error():
    # 0.5**3000 underflows a float; exact integers keep the tail sum and the division safe
    assert 0.0 <= binomial_two_sided(0, 3000) < 1e-300
    assert binomial_two_sided(1400, 3000) == pytest.approx(2.7e-4, rel=0.1)
    assert binomial_two_sided(1500, 3000) == 1.0


def test_paired_bootstrap_contains_difference():
    rng = np.random.default_rng(0)
    a = rng.random(300) < 0.7
    b = rng.random(300) < 0.5
    res = paired_bootstrap_diff(a, b)
    assert res["diff"] == pytest.approx(a.mean() - b.mean())
    assert res["ci_low"] <= res["diff"] <= res["ci_high"]


def test_paired_bootstrap_identical_methods_is_zero():
    a = [True, False, True, False, True]
    assert paired_bootstrap_diff(a, a) == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0}


def test_paired_pairing_narrows_interval():
    # b is a with one flip: paired differences vary little, so the interval is tight
    rng = np.random.default_rng(2)
    a = rng.random(200) < 0.5
    b = a.copy()
    b[0] = not b[0]
    res = paired_bootstrap_diff(a, b)
    assert res["ci_high"] - res["ci_low"] <= 0.02


def test_paired_requires_equal_lengths():
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1, 0], [1])
    with pytest.raises(ValueError):
        mcnemar_exact([], [])


def test_holm_matches_the_step_down_procedure():
    # m = 4: sorted p 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
    assert holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([0.6, 0.9]) == [1.0, 1.0]
    assert holm([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.1, 1.5])


def test_binomial_agrees_with_exact_sum():
    from math import comb

    assert binomial_two_sided(2, 11) == pytest.approx(2 * sum(comb(11, i) for i in range(3)) / 2**11)


def test_binomial_is_scipy_binomtest():
    from scipy.stats import binomtest

    for k, n in [(0, 1), (3, 7), (4, 4), (9, 11), (50, 120), (61, 120)]:
        assert binomial_two_sided(k, n) == pytest.approx(binomtest(k, n, 0.5).pvalue, rel=1e-9)


def _enumerated_sign_flip(d):
    import itertools

    obs, sums = abs(sum(d)), []
    for eps in itertools.product((-1, 1), repeat=len(d)):
        sums.append(abs(sum(e * abs(x) for e, x in zip(eps, d))))
    return sum(s >= obs - 1e-12 for s in sums) / len(sums)


def test_sign_flip_matches_full_enumeration():
    for d in ([1 / 3, -2 / 3, 1, 1, 0, 2 / 3, 1 / 3, -1 / 3, 1], [0.5, 0.5, -1, 1, 1, 0.25], [1] * 6):
        assert sign_flip_exact(d) == pytest.approx(_enumerated_sign_flip(d), rel=1e-9)


def test_sign_flip_off_the_lattice_falls_back_to_random_flips():
    d = [0.1 * np.pi, -0.02, 0.3, 0.31 * np.e, 0.2, 0.05, -0.11]
    assert sign_flip_exact(d, n_flips=40_000) == pytest.approx(_enumerated_sign_flip(d), abs=0.01)


def test_sign_flip_large_n_uses_fft_and_stays_a_probability():
    rng = np.random.default_rng(0)
    d = rng.integers(-3, 4, 675) / 3
    p = sign_flip_exact(d)
    assert 0.0 <= p <= 1.0
    assert sign_flip_exact(np.abs(d)) < 1e-12  # 2^-600 or so, read through the FFT's rounding noise


def test_sign_flip_ci_excludes_zero_exactly_when_its_normal_test_rejects():
    from scipy.stats import norm

    for mean, sd, n in [(0.1, 0.5, 100), (0.05, 0.5, 100), (0.3, 0.2, 12)]:
        low, high = sign_flip_ci(mean, sd, n, 0.95)
        z = n * mean / np.sqrt(n * (sd**2 + mean**2))
        assert (low > 0) == (2 * norm.sf(abs(z)) < 0.05)
        assert low < mean < high
    assert sign_flip_ci(1.0, 0.0, 3, 0.95) == (float("-inf"), float("inf"))


def test_holm_levels_step_down():
    assert holm_levels([0.03, 0.01, 0.5, 0.02], 0.05) == pytest.approx([0.05 / 2, 0.05 / 4, 0.05, 0.05 / 3])


def test_the_lattice_is_searched_up_to_its_bound_and_no_further():
    """Seed means lie on a lattice of at most 2520 (= lcm 1..10 seeds); a step of 1/2521 does
    not, and is then tested by random flips."""
    from retrace.scoring.stats import lattice_scale

    assert lattice_scale(np.array([1 / 2520, 3 / 2520])) == 2520
    assert lattice_scale(np.array([1 / 2521])) is None


def test_the_long_convolution_by_fft_is_the_full_convolution():
    from retrace.scoring.stats import _convolve

    x, y = np.linspace(0.1, 1.0, 1200), np.linspace(1.0, 0.2, 900)  # over 10^6 products: FFT
    out = _convolve(x, y)
    assert len(out) == len(x) + len(y) - 1
    assert np.allclose(out, np.convolve(x, y))


def test_random_flips_count_every_flip_they_draw():
    """Off the lattice: one difference of pi, whose every sign pattern is as extreme as the
    observed one, so every one of the n_flips draws is a hit and p = 1 exactly."""
    from retrace.scoring.stats import sign_flip_exact

    assert sign_flip_exact([np.pi], n_flips=4097) == 1.0


def test_no_difference_at_all_is_no_evidence():
    from retrace.scoring.stats import sign_flip_exact

    assert sign_flip_exact([0.0, 0.0, 0.0]) == 1.0
    assert sign_flip_exact([]) == 1.0


def test_holm_names_the_first_three_p_values_out_of_range():
    from retrace.scoring.stats import holm

    with pytest.raises(ValueError, match=r"got \[7\. 8\. 9\.\]$"):
        holm([1.0, 7.0, 8.0, 9.0, 6.0])  # 1.0 is a valid p-value; 6.0 is the fourth bad one


@pytest.mark.parametrize(
    "mean, sd, n, level", [(0.1, 0.5, 100, 0.95), (-0.2, 0.3, 12, 0.9), (0.0, 1.0, 6, 0.5)]
)
def test_sign_flip_ci_ends_where_the_shifted_sum_is_exactly_on_the_test_boundary(mean, sd, n, level):
    """At each end delta: n^2 (mean - delta)^2 = z^2 * sum_i (d_i - delta)^2, the sum's
    randomisation variance, where sum_i (d_i - delta)^2 = n (sd^2 + (mean - delta)^2)."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    for delta in sign_flip_ci(mean, sd, n, level):
        lhs = n**2 * (mean - delta) ** 2
        assert lhs == pytest.approx(z**2 * n * (sd**2 + (mean - delta) ** 2), rel=1e-9)


def test_no_questions_give_no_interval_at_any_level():
    from retrace.scoring.stats import paired_mean_ci

    for level in (0.5, 0.95):
        assert paired_mean_ci(0.0, 0.0, 0, level) == (float("-inf"), float("inf"))


def test_differences_that_are_only_float_noise_are_no_evidence():
    """Seed means that are equal up to rounding (0.1 + 0.2 - 0.3, thirds summed) differ by ~1e-17."""
    noise = [(0.1 + 0.2) - 0.3, (1 / 3 + 1 / 3 + 1 / 3) - 1.0 + 1e-15, -2e-16]
    assert sign_flip_exact(noise) == 1.0
    assert sign_flip_exact([]) == 1.0


def test_holm_names_only_the_p_values_outside_0_and_1():
    with pytest.raises(ValueError) as e:
        holm([0.0, 1.0, 1.5, -0.25])
    listed = [float(v) for v in str(e.value).split("got ")[1].strip("[]").split()]
    assert listed == [1.5, -0.25]


def test_off_the_lattice_the_smallest_p_is_one_over_200001_random_flips():
    """Differences no common scale makes integers, all of one sign: no random sign pattern of
    200,000 reaches the observed sum, so p = (1 + 0) / (1 + 200,000)."""
    d = np.sqrt(np.arange(2, 42, dtype=float)) / 7.0
    assert sign_flip_exact(d) == 1 / 200_001


def test_the_stratified_exact_test_gives_p_at_most_1_and_exactly_1_at_the_centre():
    from retrace.scoring.stats import stratified_exact

    rng = np.random.default_rng(3)
    ps = [stratified_exact(rng.integers(0, 2, (3, 8)), rng.integers(0, 2, (1, 8))) for _ in range(40)]
    assert all(0.0 < p <= 1.0 for p in ps)
    a = np.array([[1, 0, 1, 0]] * 3)  # each question: A's three draws alike, B's one the same
    assert stratified_exact(a, a[:1]) == 1.0


def test_holm_accepts_p_values_of_exactly_0_and_1_and_refuses_any_below_0():
    assert holm([0.0, 1.0]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="must lie in"):
        holm([0.5, -0.25])


def test_the_lattice_scale_is_the_smallest_that_makes_every_difference_an_integer():
    from retrace.scoring.stats import lattice_scale

    assert lattice_scale(np.array([1.0, -2.0, 3.0])) == 1
    assert lattice_scale(np.array([1 / 3, -2 / 3, 1.0])) == 3
    assert lattice_scale(np.array([1 / 2, 1 / 3])) == 6


def test_the_random_path_is_reproducible_from_its_default_seed():
    d = np.sqrt(np.arange(2, 14, dtype=float)) * np.array([1, -1, 1, 1, -1, 1, 1, 1, -1, 1, 1, -1])
    p = sign_flip_exact(d)
    assert 0.01 < p < 0.99 and p == sign_flip_exact(d, seed=0) and p != sign_flip_exact(d, seed=1)


def test_the_interval_adds_the_agresti_min_pseudo_pairs_to_the_differences():
    """+1 and -1 at weight 1/2 each and 0 at weight 1: n + 2 differences in all."""
    from retrace.scoring.stats import paired_mean_ci

    d = np.array([1.0, 0.0, 1.0, 1.0, -1.0, 0.0, 1.0, 1.0])
    values, weights = np.append(d, [1.0, -1.0, 0.0]), np.append(np.ones(len(d)), [0.5, 0.5, 1.0])
    mean = np.average(values, weights=weights)
    sd = np.sqrt(np.average((values - mean) ** 2, weights=weights))
    for level in (0.5, 0.95):
        got = paired_mean_ci(float(d.mean()), float(d.std()), len(d), level)
        assert got == pytest.approx(sign_flip_ci(mean, sd, len(d) + 2, level))
    assert np.isfinite(paired_mean_ci(1.0, 0.0, 1, 0.5)).all()  # one question, 3 with the pseudo-pairs


def test_a_p_value_never_exceeds_1_even_when_its_two_tails_round_above_it():
    """Three wins and four losses: the two tails hold all the mass, and their float sum is
    1.0000000000000009."""
    assert sign_flip_exact([1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0]) == 1.0


def test_a_long_convolution_by_fft_is_a_pmf_with_no_negative_entries():
    """The FFT's rounding leaves entries of about -1e-18 where the true mass is ~0."""
    from scipy.stats import binom

    from retrace.scoring.stats import _convolve

    p = binom.pmf(np.arange(2001), 2000, 0.5)  # 2001 x 2001 products: the FFT path
    out = _convolve(p, p)
    assert out.min() >= 0.0 and out.sum() == pytest.approx(1.0)
