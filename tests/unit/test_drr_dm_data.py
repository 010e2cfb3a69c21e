"""DRR loops (Algorithm 1, inference) and DM data preparation (drr/loop.py, drr/dm_data.py)."""

import pytest

from retrace.drr import dm_data as ds
from retrace.drr.loop import Attempt, distil, infer, label_turns


def scripted(answers):
    """A reasoner that answers from a list, recording the context length it was given."""
    seen = []

    def reasoner(question, context):
        seen.append(len(context))
        return answers[len(context)], f"because {answers[len(context)]}"

    return reasoner, seen


# --- Algorithm 1 and inference -------------------------------------------------------


def test_distil_stops_at_first_correct_answer():
    reasoner, seen = scripted(["A", "C", "B", "B"])
    out = distil("q?", reasoner, lambda a: a == "B", max_turns=4)
    assert [a.verdict for a in out] == ["reject", "reject", "accept"]
    assert [a.answer for a in out] == ["A", "C", "B"] and seen == [0, 1, 2]


def test_distil_stops_after_max_turns_all_rejected():
    reasoner, seen = scripted(["A"] * 10)
    out = distil("q?", reasoner, lambda a: a == "B", max_turns=4)
    assert [a.verdict for a in out] == ["reject"] * 4 and seen == [0, 1, 2, 3]


def test_distil_context_holds_previous_attempts_only():
    contexts = []

    def reasoner(question, context):
        contexts.append(context)
        return ("B" if len(context) == 2 else "A"), "r"

    distil("q?", reasoner, lambda a: a == "B")
    assert contexts[2] == (Attempt("A", "r", "reject"), Attempt("A", "r", "reject"))


def test_infer_stops_when_judge_accepts_and_abstains_otherwise():
    reasoner, _ = scripted(["A", "B", "C", "D", "E"])
    accept_b = lambda q, c, a, r: "accept" if a == "B" else "reject"
    out = infer("q?", reasoner, accept_b, max_turns=5)
    assert out["status"] == "answered" and [t["answer"] for t in out["turns"]] == ["A", "B"]
    reasoner, _ = scripted(["A"] * 5)
    out = infer("q?", reasoner, lambda *a: "reject", max_turns=5)
    assert out["status"] == "abstained" and len(out["turns"]) == 5
    labelled = label_turns(out, lambda a: a == "A")
    assert all(t["correct"] for t in labelled["turns"]) and "correct" not in out["turns"][0]


def test_bad_judge_output_and_max_turns_are_errors():
    reasoner, _ = scripted(["A"])
    with pytest.raises(ValueError):
        infer("q?", reasoner, lambda *a: "maybe")
    with pytest.raises(ValueError):
        distil("q?", reasoner, lambda a: True, max_turns=0)


# --- rows, downsampling, split, weights, falsifier ------------------------------------


def trace(qid, n_rejects, accepted=True, dataset="d1"):
    atts = [{"answer": f"w{i}", "rationale": f"r{i}", "verdict": "reject"} for i in range(n_rejects)]
    if accepted:
        atts.append({"answer": "ok", "rationale": "good", "verdict": "accept"})
    return {"id": qid, "dataset": dataset, "question": f"question {qid}", "attempts": atts}


TRACES = (
    [trace(f"a{i}", i % 4) for i in range(30)]
    + [trace(f"n{i}", 4, False) for i in range(10)]
    + [trace(f"b{i}", 2, dataset="d2") for i in range(20)]
)


def test_rows_carry_question_context_answer_rationale_label():
    rows = ds.rows_from_trace(trace("q", 2))
    assert [r["label"] for r in rows] == [0, 0, 1]
    assert rows[2]["context"] == [{"answer": "w0", "rationale": "r0"}, {"answer": "w1", "rationale": "r1"}]
    assert rows[0]["context"] == [] and rows[2]["row_id"] == "q#2"
    text = ds.dm_input_text(rows[2])
    assert "question q" in text and "Wrong Answer! Try again." in text and "Rationale: good" in text
    with pytest.raises(ValueError):
        ds.rows_from_traces([trace("q", 1), trace("q", 2)])


def test_downsampling_balances_classes_per_dataset():
    rows = ds.downsample_rejects(ds.rows_from_traces(TRACES), seed=1)
    for name in ("d1", "d2"):
        counts = ds.label_counts(r for r in rows if r["dataset"] == name)
        assert counts["accept"] == counts["reject"] > 0
    assert ds.label_counts(rows)["accept"] == 50  # every Accept kept


def test_grouped_split_shares_no_id_and_is_seeded():
    rows = ds.rows_from_traces(TRACES)
    train, dev = ds.grouped_split(rows, seed=0)
    assert not {r["id"] for r in train} & {r["id"] for r in dev}
    assert len(train) + len(dev) == len(rows)
    assert len({r["id"] for r in dev}) == round(0.2 * 40) + round(0.2 * 20)  # per dataset
    again = ds.grouped_split(list(reversed(rows)), seed=0)
    assert again == (train, dev)
    other = ds.grouped_split(rows, seed=1)
    assert {r["id"] for r in other[1]} != {r["id"] for r in dev}


def test_class_weights_are_three_to_one_or_unweighted():
    w = ds.class_weights()
    assert w[ds.ACCEPT] == 3 * w[ds.REJECT]
    assert ds.class_weights(weighted=False) == {0: 1.0, 1: 1.0}
    # Eq. (1): with equal logits every example costs w_y * log 2
    loss = ds.weighted_cross_entropy([[0.0, 0.0], [0.0, 0.0]], [0, 1], w)
    assert loss == pytest.approx((1 + 3) / 2 * 0.6931471805599453)


def test_shuffled_labels_keep_counts_but_break_pairing():
    data = ds.build_dataset(TRACES, seed=3)
    fake = ds.build_dataset(TRACES, seed=3, shuffled_labels=True)
    assert fake["dev"] == data["dev"]
    assert ds.label_counts(fake["train"]) == ds.label_counts(data["train"])
    assert [r["row_id"] for r in fake["train"]] == [r["row_id"] for r in data["train"]]
    moved = sum(a["label"] != b["label"] for a, b in zip(fake["train"], data["train"]))
    assert moved > len(data["train"]) // 4
    assert ds.shuffle_labels(data["train"], 3) == fake["train"]


def test_build_dataset_reports_counts_and_settings():
    data = ds.build_dataset(TRACES, seed=0, weighted=False)
    assert data["weights"] == {0: 1.0, 1: 1.0} and data["settings"]["weighted"] is False
    assert data["counts"]["raw"]["accept"] == 50
    assert data["counts"]["questions"]["train"] + data["counts"]["questions"]["dev"] <= 60
