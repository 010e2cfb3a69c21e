"""The DRR report section from fake artifacts: the Accept-weighting table puts both DMs'
false-positive rates side by side with the P(correct) threshold each weighting implies."""

import json

import pytest

from retrace.drr import dm, report
from retrace.drr.claims import OVERALL
from retrace.drr.dm_data import implied_accept_threshold
from tests.unit.drr_fakes import cfg

pytest.importorskip("matplotlib")


def test_implied_threshold_of_the_accept_weight():
    assert implied_accept_threshold(3.0) == pytest.approx(0.25)  # the paper's 3:1 at argmax: lenient
    assert implied_accept_threshold(1.0) == pytest.approx(0.5)
    assert implied_accept_threshold(3.0, 0.9) == pytest.approx(0.75)  # the stricter reading
    assert implied_accept_threshold(1 / 3) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        implied_accept_threshold(0.0)


def test_dev_metrics_report_the_false_positive_rate():
    m = dm.binary_metrics([0, 0, 0, 1], [0.9, 0.2, 0.7, 0.8])
    assert m["false_positive_rate"] == pytest.approx(2 / 3) and m["tn"] == 1


def _write(path, obj, jsonl=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in obj) if jsonl else json.dumps(obj))
    path.with_name(path.name + ".prov.json").write_text(json.dumps({"split": {"note": "split note"}}))
    return path


def episode(i, decision, correct):
    return {
        "id": f"q{i}",
        "status": "answered" if decision == "accept" else "abstained",
        "turns": [{"answer": "1", "letter": "B", "abstain": False, "decision": decision, "correct": correct}],
    }


def test_weighting_table_sets_both_weightings_side_by_side(tmp_path):
    root = tmp_path / "drr" / "m" / "llamacpp"
    ev = root / "eval" / "d" / "seed0" / "episodes"
    files = [
        _write(ev / "drr.jsonl", [episode(0, "accept", False), episode(1, "accept", False)], True),
        _write(ev / "drr_unweighted.jsonl", [episode(0, "reject", False), episode(1, "accept", False)], True),
        _write(
            ev / "cot.jsonl",
            [
                {**e, "turns": [{**e["turns"][0], "decision": None}]}
                for e in (episode(0, "accept", False), episode(1, "accept", True))
            ],
            True,
        ),
    ]
    train = [
        _write(
            root / "dm" / "seed0" / v / "train.json",
            {
                "weights": {"1": w, "0": 1.0},
                "n_train": 4,
                "n_dev": 2,
                "loss": [0.5],
                "dev": {"false_positive_rate": fpr},
            },
        )
        for v, w, fpr in (("weighted", 3.0, 1.0), ("unweighted", 1.0, 0.5))
    ]
    q = _write(tmp_path / "drr" / "questions" / "d" / "eval.jsonl", [], True)
    leak = _leak(tmp_path / "drr" / "leakcheck.json")
    out = tmp_path / "out"
    report.summarise(
        cfg(), files, train, [q], leak, out / "claims.csv", out / "section.json", out / "loss.png"
    )
    section = json.loads((out / "section.json").read_text())
    table = next(t for t in section["tables"] if t["caption"].startswith("Accept weighting"))
    row = dict(zip(table["columns"], table["rows"][0]))
    assert row["3:1 implied P(correct) threshold"] == 0.25 and row["1:1 implied P(correct) threshold"] == 0.5
    assert row["3:1 FPR (eval turns)"] == 1.0 and row["1:1 FPR (eval turns)"] == 0.5
    assert row["3:1 FPR (dev rows)"] == 1.0 and row["1:1 FPR (dev rows)"] == 0.5
    notes = " ".join(section["notes"])
    assert "P(correct) exceeds" in notes and "scored as WRONG" in notes


def _leak(path):
    return _write(
        path,
        {
            "verdict": "pass",
            "n_records": 1,
            "n_findings": 0,
            "n_rows_with_findings": 0,
            "by_kind": {},
            "n_unchecked": 0,
            "findings": [],
        },
    )


def test_the_overall_set_pools_every_dataset_question_by_question(tmp_path):
    """Table 1's Overall (Combined): one set of every dataset's questions; its claims pair DRR
    and CoT on the same question, whichever dataset it came from."""
    import csv

    root = tmp_path / "drr" / "m" / "llamacpp" / "eval"
    files = []
    for d, n, drr_right in (("d1", 12, 12), ("d2", 8, 2)):
        ev = root / d / "seed0" / "episodes"
        eps = [{**episode(i, "accept", i < drr_right), "id": f"{d}/q{i}"} for i in range(n)]
        cot = [
            {**e, "turns": [{**e["turns"][0], "decision": None, "correct": i % 2 == 0}]}
            for i, e in enumerate(eps)
        ]
        files += [_write(ev / "drr.jsonl", eps, True), _write(ev / "cot.jsonl", cot, True)]
    q = _write(tmp_path / "drr" / "questions" / "d1" / "eval.jsonl", [], True)
    out = tmp_path / "out"
    report.summarise(
        cfg(),
        files,
        [],
        [q],
        _leak(tmp_path / "drr" / "leakcheck.json"),
        out / "c.csv",
        out / "s.json",
        out / "l.png",
    )
    rows = {(r["dataset"], r["claim"]): r for r in csv.DictReader(open(out / "c.csv"))}
    overall = rows[(OVERALL, "DRR beats CoT on accuracy")]
    assert int(overall["n_questions"]) == 20  # 12 + 8, not a mean of two datasets
    # DRR 14/20 right, CoT 10/20 (even-numbered questions of each dataset): +0.2 pooled
    assert float(overall["delta"]) == pytest.approx(14 / 20 - 10 / 20)
    assert float(rows[("d1", "DRR beats CoT on accuracy")]["delta"]) == pytest.approx(1 - 6 / 12)
    table = json.loads((out / "s.json").read_text())["tables"][0]
    acc = {(r[1], r[3]): r[5] for r in table["rows"]}
    assert acc[(OVERALL, "drr")] == 70.0 and acc[(OVERALL, "cot")] == 50.0
