"""DRR metrics (scoring/metrics.py) on constructed episodes with known answers."""

import pytest

from retrace.drr import metrics as m
from retrace.drr.loop import NeedsMoreTurns, replay


def ep(qid, status, *turns):
    """turns: (correct, decision) pairs."""
    return {
        "id": qid,
        "status": status,
        "turns": [{"answer": str(i), "correct": c, "decision": d} for i, (c, d) in enumerate(turns)],
    }


# 4 questions: correct, wrong, abstain (last attempt correct), abstain (last attempt wrong).
EPISODES = [
    ep("q1", "answered", (False, "reject"), (True, "accept")),
    ep("q2", "answered", (False, "accept")),
    ep("q3", "abstained", (False, "reject"), (True, "reject")),
    ep("q4", "abstained", (False, "reject"), (False, "reject")),
]


def test_formula_score_k1_and_k3():
    # FS(k) = 100 * (n_correct - k * n_wrong) / n: (1 - 1) / 4 and (1 - 3) / 4
    assert m.fs1(EPISODES) == pytest.approx(0.0)
    assert m.fs3(EPISODES) == pytest.approx(-50.0)
    assert m.formula_score(EPISODES, 2) == pytest.approx(-25.0)


def test_all_abstain_scores_zero_and_all_correct_hundred():
    abstain = [ep("a", "abstained", (False, "reject")), ep("b", "abstained")]
    assert m.fs1(abstain) == 0.0 and m.fs3(abstain) == 0.0 and m.accuracy(abstain) == 0.0
    right = [ep("a", "answered", (True, "accept"))]
    assert m.fs3(right) == 100.0


def test_no_abstentions_matches_table1_identity():
    # Without abstentions FS(1) = 2 Acc - 100 and FS(3) = 4 Acc - 300 (Table 1 baselines).
    eps = [ep(str(i), "answered", (i < 3, None)) for i in range(4)]
    assert m.fs1(eps) == pytest.approx(2 * m.accuracy(eps) - 100)
    assert m.fs3(eps) == pytest.approx(4 * m.accuracy(eps) - 300)


def test_accuracy_variants_are_labelled_apart():
    assert m.accuracy(EPISODES) == 25.0  # only q1
    assert m.accuracy_last_attempt(EPISODES) == 50.0  # q1 and q3's last attempt
    s = m.drr_summary(EPISODES)
    assert s["accuracy_abstain_as_wrong"] == 25.0 and s["accuracy_abstain_as_last_attempt"] == 50.0
    assert s["abstention_rate"] == 50.0 and s["fs_3"] == -50.0


def test_acc_d_with_a_judge_uses_last_turn_decision():
    # q1 accept correct: right; q2 accept wrong: wrong; q3 reject correct: wrong; q4 reject wrong: right
    assert [m.decision_correct(e) for e in EPISODES] == [True, False, False, True]
    assert m.critic_decision_accuracy(EPISODES) == 50.0


def test_acc_d_zero_shot_credits_correct_answers_and_abstentions():
    eps = [
        ep("a", "answered", (True, None)),
        ep("b", "answered", (False, None)),
        ep("c", "abstained", (False, None)),
    ]
    assert m.critic_decision_accuracy(eps) == pytest.approx(200 / 3)


def test_discriminator_precision_recall_fpr_over_all_turns():
    s = m.discriminator_stats(EPISODES)
    # turns: q1 (F,rej)=tn (T,acc)=tp; q2 (F,acc)=fp; q3 tn, (T,rej)=fn; q4 tn, tn
    assert (s["tp"], s["fp"], s["fn"], s["tn"]) == (1, 1, 1, 4)
    assert s["precision_accept"] == 0.5 and s["recall_accept"] == 0.5
    assert s["false_positive_rate"] == pytest.approx(1 / 5)
    assert s["turn_accuracy"] == pytest.approx(5 / 7)


def test_always_accept_and_always_reject_judges():
    full = [
        ep("a", "abstained", *[(c, "reject") for c in (False, True, False, False, True)]),
        ep("b", "abstained", *[(False, "reject")] * 5),
    ]
    acc = [replay(e, m.always_accept) for e in full]
    rej = [replay(e, m.always_reject) for e in full]
    assert all(e["status"] == "answered" and len(e["turns"]) == 1 for e in acc)
    assert m.accuracy(acc) == 0.0 and m.fs1(acc) == -100.0
    assert m.discriminator_stats(acc)["false_positive_rate"] == 1.0
    assert all(e["status"] == "abstained" for e in rej) and m.fs3(rej) == 0.0
    assert m.discriminator_stats(rej)["precision_accept"] is None
    assert m.accuracy_last_attempt(rej) == 50.0


def test_replay_needs_more_turns_when_judge_outlasts_the_stored_turns():
    with pytest.raises(NeedsMoreTurns):
        replay(EPISODES[0], m.always_reject)


def test_implied_rates_recover_counts():
    r = m.implied_rates(m.fs1(EPISODES), 1, m.fs3(EPISODES), 3)
    assert r == pytest.approx({"correct": 25.0, "wrong": 25.0, "abstain": 50.0})


def test_per_question_feeds_paired_claims():
    assert m.per_question(EPISODES, "fs", k=3) == {"q1": 1.0, "q2": -3.0, "q3": 0.0, "q4": 0.0}
    assert m.per_question(EPISODES, "acc_d") == {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 1.0}


def test_malformed_episodes_are_errors():
    with pytest.raises(ValueError):
        m.outcome({"id": "x", "status": "answered", "turns": []})
    with pytest.raises(ValueError):
        m.outcome({"id": "x", "status": "gave_up", "turns": []})
    with pytest.raises(ValueError):
        m.fs1([])
