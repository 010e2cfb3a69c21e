"""Episodes per DRR method from one stored rejection path: stopping, abstention, falsifiers."""

import pytest

from retrace.drr import episodes, metrics
from tests.unit.drr_fakes import PROBLEMS

P = PROBLEMS[0]  # gold B (index 1)


def turn(answer, letter=None, abstain=False):
    return {"answer": answer, "rationale": f"r{answer}", "letter": letter, "abstain": abstain}


ROW = {
    "problem_id": P.id,
    "path": [turn("0", "A"), turn("1", "B"), turn("2", "C")],
    "abstain": {**turn("none of the above", None, True), "messages": []},
    "selfcritic": {"letter": "C", "steps": []},
}


def test_dm_episode_stops_at_first_accept_and_scores_after():
    ep = episodes.episode("drr", P, ROW, 3, ["reject", "accept", "accept"])
    assert ep["status"] == "answered" and len(ep["turns"]) == 2
    assert [t["correct"] for t in ep["turns"]] == [False, True]
    assert metrics.outcome(ep) == "correct" and metrics.decision_correct(ep)


def test_all_rejected_is_abstention_scored_both_ways():
    ep = episodes.episode("drr", P, ROW, 3, ["reject"] * 3)
    assert ep["status"] == "abstained" and len(ep["turns"]) == 3
    assert metrics.fs_points(ep, 3) == 0.0
    assert metrics.accuracy([ep]) == 0.0 and metrics.accuracy_last_attempt([ep]) == 0.0
    ep2 = episodes.episode("drr", P, {**ROW, "path": ROW["path"][:2] + [turn("1", "B")]}, 3, ["reject"] * 3)
    assert metrics.accuracy([ep2]) == 0.0 and metrics.accuracy_last_attempt([ep2]) == 100.0


def test_falsifier_judges_and_cot_use_the_same_path():
    acc = episodes.episode("always_accept", P, ROW, 3)
    cot = episodes.episode("cot", P, ROW, 3)
    rej = episodes.episode("always_reject", P, ROW, 3)
    assert acc["turns"][0]["answer"] == cot["turns"][0]["answer"] == "0" and len(acc["turns"]) == 1
    assert cot["turns"][0]["decision"] is None and acc["turns"][0]["decision"] == "accept"
    assert rej["status"] == "abstained" and len(rej["turns"]) == 3
    with pytest.raises(Exception):  # too few stored turns for max_turns: must regenerate, not guess
        episodes.episode("always_reject", P, ROW, 5)


def test_abstain_and_selfcritic_baselines():
    ab = episodes.episode("abstain", P, ROW, 3, nota="abstain")
    assert ab["status"] == "abstained" and metrics.decision_correct(ab)  # zero-shot rule
    sc = episodes.episode("selfcritic", P, ROW, 3)
    assert sc["status"] == "answered" and metrics.outcome(sc) == "wrong"


def test_none_of_the_above_is_wrong_by_default_and_an_abstention_as_a_variant():
    """Old behaviour: NOTA was always an abstention (FS 0); Table 1's Abstain rows score it wrong."""
    ab = episodes.episode("abstain", P, ROW, 3)
    assert ab["status"] == "answered" and metrics.outcome(ab) == "wrong"
    assert metrics.fs_points(ab, 3) == -3.0 and not metrics.decision_correct(ab)
    row = {**ROW, "path": [turn("none of the above", None, True)]}
    ep = episodes.episode("drr", P, row, 1, ["accept"])
    assert ep["status"] == "answered" and metrics.outcome(ep) == "wrong"
    assert episodes.episode("drr", P, row, 1, ["accept"], nota="abstain")["status"] == "abstained"
    assert episodes.nota_reading(ab, "abstain")["status"] == "abstained"
    assert episodes.nota_reading(episodes.nota_reading(ab, "abstain"), "wrong") == ab
    # a DM that rejected everything abstained, whatever the reading
    rej = episodes.episode("drr", P, row, 1, ["reject"])
    assert episodes.nota_reading(rej, "wrong")["status"] == "abstained"
    with pytest.raises(ValueError, match="drr.nota"):
        episodes.nota_reading(ab, "maybe")


def test_report_labels_the_other_nota_reading():
    from retrace.drr import report

    ab = episodes.episode("abstain", P, ROW, 3)
    label, eps = report.nota_variant([ab], "abstain", "wrong")
    assert label == "abstain [NOTA = abstention]" and eps[0]["status"] == "abstained"
    cot = episodes.episode("cot", P, ROW, 3)
    assert report.nota_variant([cot], "cot", "wrong") is None


def test_dm_rows_give_each_turn_its_rejected_history():
    rows = episodes.dm_rows(P, ROW)
    assert [len(r["context"]) for r in rows] == [0, 1, 2]
    assert rows[2]["context"][1]["answer"] == "1" and rows[2]["answer"] == "2"
    assert rows[0]["question"].startswith("Question: ")


def test_unknown_method_is_an_error():
    with pytest.raises(ValueError, match="unknown DRR method"):
        episodes.episode("nope", P, ROW, 3)


def test_acc_d_reads_nota_as_an_abstain_decision_while_acc_scores_it_wrong():
    from retrace.drr import report

    ab = episodes.episode("abstain", P, ROW, 3)
    row = report.metrics_row("m", "d", 0, "abstain", [ab])
    cols = dict(zip(report.COLUMNS, row))
    assert cols["acc (abstain = wrong) %"] == 0.0 and cols["FS(3)"] == -300.0 and cols["Acc(D)"] == 100.0
