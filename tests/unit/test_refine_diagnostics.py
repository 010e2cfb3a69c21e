"""Refinement diagnostics (retrace.scoring.refine_diagnostics) on constructed refine rows
with a fake exact-match task."""

from __future__ import annotations

import pytest

from retrace.scoring.refine_diagnostics import diagnose, rollout_flips, vote_flips
from retrace.util.records import Problem


class ExactTask:
    """Answer = the stripped text; "?" means no answer; equal strings are the same answer."""

    def extract_answer(self, text, problem):
        return None if text.strip() == "?" else text.strip()

    def is_correct(self, answer, problem):
        return answer == problem.gold

    def same_answer(self, a, b):
        return a == b


def refine_row(pid: str, *depths: list[str]) -> dict:
    """A refine row whose depth d holds rollout texts `depths[d]`."""
    return {
        "problem_id": pid,
        "method": "refine",
        "samples": [{"index": i, "text": t} for i, t in enumerate(depths[-1])],
        "extra": {"depths": [[{"text": t} for t in texts] for texts in depths]},
    }


PROBLEMS = {p: Problem(p, "q", "1") for p in ("a", "b", "c", "d")}
ROWS = [
    refine_row("a", ["2", "2", "1"], ["1", "1", "2"], ["1", "1", "1"]),  # recovered at d=1
    refine_row("b", ["1", "1", "2"], ["2", "2", "1"], ["2", "2", "2"]),  # regressed at d=1
    refine_row("c", ["1", "1", "1"], ["1", "1", "1"], ["1", "?", "1"]),  # right throughout
    refine_row("d", ["3", "4", "5"], ["3", "4", "5"], ["3", "3", "3"]),  # wrong, diversity collapses
]


@pytest.fixture(scope="module")
def result():
    return diagnose(ROWS, PROBLEMS, ExactTask(), n_boot=200)


def test_accuracy_by_depth(result):
    assert [d["accuracy"] for d in result["depths"]] == [0.5, 0.5, 0.5]
    assert result["depths"][0]["rollout_accuracy"] == pytest.approx(6 / 12)
    assert result["depths"][2]["rollout_accuracy"] == pytest.approx(5 / 12)


def test_vote_level_recovery_and_regression(result):
    d1, d2 = result["depths"][1], result["depths"][2]
    assert (d1["recovered"], d1["regressed"]) == (1, 1)
    assert d1["recovery_rate"] == d1["regression_rate"] == 0.25
    assert d1["recovery_rate_given"] == d1["regression_rate_given"] == 0.5
    assert (d2["recovered"], d2["regressed"]) == (0, 0)
    assert "recovered" not in result["depths"][0]


def test_per_rollout_benefit(result):
    d1, d2 = result["depths"][1], result["depths"][2]
    # d=1: a fixes 2 and breaks 1, b breaks 2 and fixes 1 -> net 0 over 12 rollouts.
    assert (d1["rollouts_fixed"], d1["rollouts_broken"], d1["benefit"]) == (3, 3, 0.0)
    # d=2: a fixes rollout 2; b breaks rollout 2; c's rollout 1 loses its answer.
    assert (d2["rollouts_fixed"], d2["rollouts_broken"]) == (1, 2)
    assert d2["benefit"] == pytest.approx(-1 / 12)


def test_diversity_counts_answer_classes_without_none(result):
    assert [d["answer_classes"] for d in result["depths"]] == [(2 + 2 + 1 + 3) / 4, (2 + 2 + 1 + 3) / 4, 1.0]
    # normalised by the 3 rollouts, as the paper's 0.80-0.97 values are (1 = all differ)
    assert [d["diversity"] for d in result["depths"]] == pytest.approx(
        [(2 + 2 + 1 + 3) / 12, (2 + 2 + 1 + 3) / 12, 1 / 3]
    )


def test_terminal_vs_depth0_is_a_paired_test(result):
    t = result["terminal_vs_depth0"]
    assert t["diff"] == 0.0 and (t["a_only"], t["b_only"]) == (1, 1) and t["p_value"] == 1.0
    assert [p["vote_correct"] for p in result["per_problem"]][0] == [False, True, True]


def test_flip_helpers_on_small_cases():
    assert vote_flips([True, True], [True, True])["recovery_rate_given"] is None
    assert rollout_flips([[False, False]], [[True, True]])["benefit"] == 1.0


def test_rows_without_depths_are_refused():
    with pytest.raises(ValueError, match="not a refine row"):
        diagnose([{"problem_id": "a", "samples": [{"text": "1"}], "extra": {}}], PROBLEMS, ExactTask())


def test_n_by_d_grid_reads_smaller_cells_from_the_stored_run():
    rows = [refine_row("a", ["1", "2", "2"], ["1", "1", "2"])]
    cells = {
        (c["n"], c["depth"]): c["accuracy"]
        for c in diagnose(rows, {"a": Problem("a", "q", "1")}, ExactTask(), n_boot=50)["grid"]
    }
    assert set(cells) == {(n, d) for n in (1, 2, 3) for d in (0, 1)}
    assert cells[(1, 0)] == 1.0  # the first rollout alone is right
    assert cells[(3, 0)] == 0.0  # all three vote "2" at depth 0
    assert cells[(3, 1)] == 1.0  # refinement flips the vote
    assert cells[(2, 0)] == 1.0  # a 1-1 tie goes to the earliest answer
