"""What the claims engine refuses and what its note says about the seeds it counts
(retrace.scoring.claims.compare): no runs, a non-finite score, a greedy method's other seeds.

    .venv/bin/python -m pytest -q tests/unit/test_claims_inputs.py
"""

from __future__ import annotations

import math

import pytest

from retrace.scoring.claims import compare

QUESTIONS = [f"q{i}" for i in range(12)]


def seed(scores) -> dict[str, float]:
    return dict(zip(QUESTIONS, scores, strict=True))


def test_no_runs_on_either_side_are_refused():
    runs = [seed([1.0] * 12)]
    with pytest.raises(ValueError, match="no runs"):
        compare([], runs)
    with pytest.raises(ValueError, match="no runs"):
        compare(runs, [])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_score_is_refused_naming_its_question_and_seed(bad):
    scores, later = [1.0] * 12, [1.0] * 12
    scores[7], later[9] = bad, bad
    with pytest.raises(ValueError, match=r"question 'q7': non-finite score .* \(seed 1\); refused"):
        compare([seed([1.0] * 12), seed(scores), seed(later)], [seed([0.0] * 12)])  # the first named


def greedy_runs():
    """Three seeds of a temperature-0 method whose seed 2 differs on two questions."""
    base = [1.0, 0.0] * 6
    other = list(base)
    other[0], other[1] = 0.0, 1.0
    return [seed(base), seed(base), seed(other)]


def drawn(k: int) -> list[dict]:
    """k sampled seeds that are draws (each right on a question of its own), not copies."""
    return [seed([0.0] * j + [1.0] + [0.0] * (11 - j)) for j in range(k)]


@pytest.mark.parametrize(
    "repeatable, says",
    [
        (None, "which differ on 2 questions)"),
        (False, "which differ on 2 questions: the engine is not deterministic)"),
        (True, "which differ on 2 questions although the engine is deterministic: check it)"),
    ],
)
def test_a_greedy_methods_note_says_how_its_uncounted_seeds_compare(repeatable, says):
    row = compare(greedy_runs(), drawn(3), deterministic=(True, False), repeatable=(repeatable, None))
    assert row["note"] == f"method: temperature 0, seed 0 of 3 counted (the others are reruns, {says}"
    assert row["delta"] == pytest.approx(0.5 - 1 / 12)  # seed 0 alone, against 3 draws


def test_identical_reruns_on_a_deterministic_engine_raise_no_alarm():
    same = [seed([1.0, 0.0] * 6)] * 3
    row = compare(same, drawn(3), deterministic=(True, False), repeatable=(True, None))
    assert row["note"] == "method: temperature 0, seed 0 of 3 counted (the others are reruns, identical)"


def test_each_sides_accuracy_sd_is_over_its_seeds_accuracies():
    """Three seeds at accuracy 1/2, 1/4 and 3/4 (12 questions): sd 1/4 over seeds (ddof 1)."""
    method = [seed([1.0] * 6 + [0.0] * 6), seed([1.0] * 3 + [0.0] * 9), seed([1.0] * 9 + [0.0] * 3)]
    baseline = [seed([1.0] * 3 + [0.0] * 9), seed([0.0] * 3 + [1.0] * 6 + [0.0] * 3)]  # 1/4 and 1/2
    row = compare(method, baseline)
    assert row["acc_method"] == pytest.approx(0.5) and row["acc_method_sd"] == pytest.approx(0.25)
    assert row["acc_baseline"] == pytest.approx(0.375)
    assert row["acc_baseline_sd"] == pytest.approx(0.125 * 2**0.5)  # sd of (1/4, 1/2), ddof 1
    assert (row["n_seeds_method"], row["n_seeds_baseline"]) == (3, 2) and row["note"] == ""  # all counted


@pytest.mark.parametrize("n, verdict", [(9, "inconclusive"), (10, "supported")])
def test_fewer_than_ten_questions_are_always_inconclusive(n, verdict):
    """Every question won on every seed: ten questions decide the claim, nine never do."""
    won, lost = {f"q{i}": 1.0 for i in range(n)}, {f"q{i}": 0.0 for i in range(n)}
    row = compare([won] * 3, [lost] * 3)
    assert row["verdict"] == verdict
    assert ("fewer than 10 questions" in row["note"]) == (n < 10)


def test_seed_facts_for_more_than_two_sides_are_refused():
    runs = [seed([1.0] * 12)]
    with pytest.raises(ValueError):
        compare(runs, runs, deterministic=(False, False, True))


@pytest.mark.parametrize("graded", ["method", "baseline"])
def test_unequal_seed_counts_with_graded_scores_on_either_side_keep_the_sign_flip_test(graded):
    """The stratified exact test is for 0/1 scores on both sides; a side with partial credit
    (F-score, a DRR score) keeps the sign-flip test on per-question means."""
    binary = [seed([1.0, 0.0] * 6)] * 3
    partial = [seed([0.5, 0.25] * 6)]
    a, b = (partial, binary) if graded == "method" else (binary, partial)
    assert compare(a, b)["test"] == "sign_flip_exact"


def test_seeds_covering_different_questions_name_the_first_five_that_differ():
    first = seed([1.0] * 12)
    other = {f"x{i}": 1.0 for i in range(12)}
    with pytest.raises(ValueError) as e:
        compare([first, other], [first, first])
    assert "['q0', 'q1', 'q10', 'q11', 'q2'] ..." in str(e.value)


def test_a_greedy_method_with_two_seeds_counts_seed_0_alone():
    runs = [seed([1.0, 0.0] * 6), seed([1.0, 0.0] * 6)]
    row = compare(runs, drawn(2), deterministic=(True, False))
    assert row["note"] == "method: temperature 0, seed 0 of 2 counted (the others are reruns, identical)"


@pytest.mark.parametrize("alpha", [0.0, -0.01, 0.05, 0.2])
def test_a_primary_family_needs_a_level_strictly_between_0_and_alpha(alpha):
    from retrace.scoring.claims import Primary, adjust

    with pytest.raises(ValueError, match="0 < primary alpha < 0.05"):
        adjust([], alpha=0.05, primary=Primary(("c",), alpha))


def test_a_greedy_method_with_one_seed_needs_no_note():
    row = compare([seed([1.0, 0.0] * 6)], [seed([0.0] * 12)], deterministic=(True, False))
    assert row["note"] == "" and row["delta"] == pytest.approx(0.5)


def test_method_and_baseline_on_different_questions_are_refused_naming_the_first_five():
    other = {f"x{i}": 0.0 for i in range(12)}
    with pytest.raises(ValueError) as e:
        compare([seed([1.0] * 12)], [other])
    assert "method and baseline cover different questions: ['q0', 'q1', 'q10', 'q11', 'q2'] ..." in str(
        e.value
    )


ROW = {"claim": "c", "dataset": "d", "direction": "greater", "delta": 0.3, "p_value": 0.001}


def test_a_row_without_sd_diff_keeps_its_own_interval_through_holm():
    from retrace.scoring.claims import adjust

    [row] = adjust([{**ROW, "ci_low": 0.1, "ci_high": 0.5, "n_questions": 50, "sd_diff": ""}])
    assert (row["ci_low"], row["ci_high"], row["verdict"]) == (0.1, 0.5, "supported")


def test_a_row_that_does_not_say_how_many_questions_is_inconclusive_even_at_a_floor_of_one():
    from retrace.scoring.claims import adjust

    [row] = adjust([{**ROW, "ci_low": 0.1, "ci_high": 0.5, "n_questions": ""}], min_questions=1)
    assert row["verdict"] == "inconclusive"
    [row] = adjust([{**ROW, "ci_low": 0.1, "ci_high": 0.5, "n_questions": 1}], min_questions=1)
    assert row["verdict"] == "supported"
