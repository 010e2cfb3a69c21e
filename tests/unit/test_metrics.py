"""maj@k on the first k samples, the pass@k estimator, and bootstrap intervals."""

from math import comb

import numpy as np
import pytest

from retrace.scoring.metrics import accuracy, bootstrap_means, estimate, ks_for, maj_at_k_correct, pass_at_k


def exact(a, b):
    return a == b


@pytest.mark.parametrize(
    "n,ks",
    [
        (1, [1]),
        (2, [1, 2]),
        (4, [1, 2, 4]),
        (5, [1, 2, 4, 5]),
        (16, [1, 2, 4, 8, 16]),
        (12, [1, 2, 4, 8, 12]),
    ],
)
def test_ks_for(n, ks):
    assert ks_for(n) == ks


def test_pass_at_k_known_values():
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # fewer wrong samples than k: always one correct
    assert pass_at_k(10, 3, 10) == 1.0


@pytest.mark.parametrize("n,c,k", [(10, 3, 4), (20, 5, 8), (64, 1, 16), (7, 2, 7)])
def test_pass_at_k_matches_binomial_formula(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_pass_at_k_rejects_bad_arguments():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_maj_at_k_uses_first_k_samples():
    # Correct answer "1" wins among the first 4; the wrong "2" wins among all 8.
    answers = ["1", "1", "2", "3", "2", "2", "2", "1"]
    correct = [a == "1" for a in answers]
    assert maj_at_k_correct(answers, correct, 1, exact)
    assert maj_at_k_correct(answers, correct, 4, exact)
    assert not maj_at_k_correct(answers, correct, 8, exact)


def test_maj_at_k_all_none_is_wrong():
    assert not maj_at_k_correct([None, None], [False, False], 2, exact)


def test_accuracy():
    assert accuracy([True, False, True, True]) == 0.75
    with pytest.raises(ValueError):
        accuracy([])


def test_ci_contains_estimate_and_narrows_with_n():
    rng = np.random.default_rng(1)
    small = list(rng.random(50) < 0.6)
    large = list(rng.random(2000) < 0.6)
    e_small, e_large = estimate(small), estimate(large)
    for e in (e_small, e_large):
        assert e["ci_low"] <= e["value"] <= e["ci_high"]
    assert (e_large["ci_high"] - e_large["ci_low"]) < (e_small["ci_high"] - e_small["ci_low"])


def test_bootstrap_is_deterministic_and_seeded():
    vals = [1, 0, 1, 1, 0, 0, 1]
    assert np.array_equal(bootstrap_means(vals, 300, seed=3), bootstrap_means(vals, 300, seed=3))
    other = bootstrap_means(vals, 300, seed=4)
    assert not np.array_equal(bootstrap_means(vals, 300, seed=3), other)


def test_ci_degenerate_when_all_equal():
    assert estimate([True] * 10) == {"value": 1.0, "ci_low": 1.0, "ci_high": 1.0}
