"""A small run of benchmarks/claims_calibration.py: the real claims code on simulated nulls of
an experiment's own design (retrace.scoring.design)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from retrace.scoring import claims as claims_mod
from retrace.scoring.design import Design, design, simulate_cells, simulate_rows

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "claims_calibration.py"


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("claims_calibration", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_design() -> Design:
    """Two models x a 30- and a 200-question set, greedy deterministic, 3 seeds elsewhere."""
    d = Design("small")
    labels = {"greedy": (3, True), "majority": (3, False), "refine": (3, False), "refine_affirm": (1, False)}
    for model in ("m1", "m2"):
        for dataset, n in (("small", 30), ("large", 200)):
            d.cells[(model, dataset)] = {"n": n, "labels": labels}
            for claim, a, b, direction in claims_mod.PAPER_CLAIMS:
                if a in labels and b in labels:
                    d.rows.append(
                        (claim, model, dataset, a, b, direction, "acc", 1, [(model, dataset)], "plain")
                    )
    return d


def test_null_experiments_rarely_read_supported(cal):
    rate, _ = cal.null_family(small_design(), np.random.default_rng(0), (0.5, 1.0), 30)
    assert rate <= 0.1


def test_no_correction_would_fail_the_same_null(cal, monkeypatch):
    # the same simulation with the correction and the test switched off: the calibration must see it
    monkeypatch.setattr(claims_mod, "holm", lambda ps: [0.0] * len(ps))
    monkeypatch.setattr(claims_mod, "holm_levels", lambda ps, alpha: [0.5] * len(ps))
    rate, per_row = cal.null_family(small_design(), np.random.default_rng(0), (0.5, 1.0), 10)
    assert rate >= 0.5 and per_row


def test_planted_effect_is_found(cal):
    d = small_design()
    power = cal.power(d, 5, 0, dataset="large")
    assert power["majority"] >= 0.5 and set(power) == {"majority", "greedy"}


def test_paper_design_comes_from_the_experiment_file(monkeypatch):
    monkeypatch.setattr("retrace.scoring.design._count", lambda dataset, mirror: 30)
    d = design("paper", mirror="unused")
    # every claim on 4 models x 5 datasets but the conditioning ablation, run on one model
    assert d.n_rows == 4 * 5 * (len(claims_mod.PAPER_CLAIMS) - 1) + 1 * 5 + 3 * 5
    cell = d.cells[("qwen2.5-math-7b", "math500")]
    assert cell["labels"]["greedy"] == (3, True) and cell["labels"]["refine"] == (3, False)
    weaker = {r[1] for r in d.rows if r[-1] == "weaker"}
    assert "qwen2.5-1.5b-instruct vs qwen2.5-math-7b" in weaker and len(weaker) == 3


def test_simulated_deterministic_seeds_are_copies_and_methods_differ_in_draws():
    cells = simulate_cells(small_design(), np.random.default_rng(0), (0.5, 1.0))
    cell = cells[("m1", "large")]
    assert (cell["greedy"] == cell["greedy"][0]).all()
    assert not (cell["refine"] == cell["refine"][0]).all() and (cell["refine"] != cell["majority"]).any()


def test_drr_paper_design_has_the_pooled_overall_claims(monkeypatch):
    """Table 1's Overall column: each DRR claim also over every dataset's questions pooled."""
    from retrace.drr.claims import CLAIMS as DRR_CLAIMS
    from retrace.drr.claims import OVERALL

    monkeypatch.setattr("retrace.scoring.design._count", lambda dataset, mirror: 30)
    d = design("drr_paper", mirror="unused")
    overall = [r for r in d.rows if r[2] == OVERALL]
    names = {r[0] for r in overall}
    assert {"DRR beats CoT on accuracy", "DRR beats CoT on FS(3)", "DRR beats Abstain on FS(1)"} <= names
    assert names <= {c[0] for c in DRR_CLAIMS}
    cot = next(r for r in overall if r[0] == "DRR beats CoT on accuracy")
    assert cot[-1] == "pooled" and [k[1] for k in cot[8]] == [
        "commonsenseqa",
        "openbookqa",
        "piqa",
        "winogrande",
    ]
    pooled = [r for r in simulate_rows(d, np.random.default_rng(0), (0.6, 2.0)) if r["dataset"] == OVERALL]
    # every evaluation question once: 30 each from the train-file datasets, 20% of 30 of the others
    assert pooled and all(r["n_questions"] == 30 + 30 + 6 + 6 for r in pooled)


def test_false_contradicted_is_counted_beside_false_supported(cal, monkeypatch):
    # with the correction and the test switched off, the null reads "contradicted" as often as
    # "supported": the calibration counts both (docs/claims.md, Calibration)
    from collections import Counter

    monkeypatch.setattr(claims_mod, "holm", lambda ps: [0.0] * len(ps))
    monkeypatch.setattr(claims_mod, "holm_levels", lambda ps, alpha: [0.5] * len(ps))
    counts: Counter = Counter()
    cal.null_family(small_design(), np.random.default_rng(0), (0.5, 1.0), 10, counts)
    assert counts["contradicted"] >= 5


def test_a_design_that_cannot_be_built_is_one_line_not_a_traceback(cal, capsys, monkeypatch):
    def refuse(name, mirror):
        raise ValueError("config/dataset/x.yaml: questions: 30, but the data in /m yield 31; correct one")

    monkeypatch.setattr(cal, "design", refuse)
    assert cal.main(["--only", "paper", "--experiments", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "claims_calibration: paper: config/dataset/x.yaml: questions: 30, but the data in /m yield 31; correct one"
    )


def test_question_counts_come_from_the_configs_and_are_checked_against_the_data(tmp_path):
    """A clone without the mirror plans with the configs' counts; a mirror that contradicts one
    is one line naming the file."""
    from retrace.scoring.design import question_count

    empty = tmp_path / "empty"
    empty.mkdir()
    assert question_count("aime24", str(empty)) == 30 and question_count("math500", None) == 500
    assert question_count("asdiv_200", None) == 200  # its own limit
    fake = tmp_path / "mirror" / "aime24"
    fake.mkdir(parents=True)
    rows = [{"id": i, "problem": f"{i}+1?", "answer": str(i + 1)} for i in range(31)]
    (fake / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        ValueError, match=r"^config/dataset/aime24.yaml: questions: 30, but the data in .* yield 31"
    ):
        question_count("aime24", str(tmp_path / "mirror"))
    assert question_count("smoke_math_mini", None) == 4  # bundled: 20 questions, its limit 4


def test_the_exact_upper_bound_is_clopper_pearsons(cal):
    """Issue 56: 5 of 150 null experiments (0.033) have an exact 95 % upper bound of 0.076."""
    assert cal.upper(5, 150) == pytest.approx(0.0761, abs=1e-4)
    assert cal.upper(0, 72) < 0.05 < cal.upper(0, 70) and cal.upper(3, 3) == 1.0


def test_the_settings_include_a_method_by_question_interaction(cal):
    assert cal.LOOKS[-1] == cal.MAX_EXPERIMENTS >= 1000
    assert any(s[2] > 0 for s in cal.SETTINGS) and any(s[2] == 0 for s in cal.SETTINGS)


@pytest.mark.parametrize("setting", [(0.05, 1.0, 1.0), (0.5, 50.0, 0.0), (0.95, 1.0, 0.0)])
def test_screened_rows_change_no_verdict(setting):
    """The calibration skips the exact test where |z| < 1.5; every verdict after `adjust` is
    the same as with every test run, and every screened row's exact p is above 0.05."""
    d = small_design()
    for i in range(6):
        full = d.adjust(simulate_rows(d, np.random.default_rng([i, 1]), setting))
        fast = d.adjust(simulate_rows(d, np.random.default_rng([i, 1]), setting, screen=True))
        assert [r["verdict"] for r in full] == [r["verdict"] for r in fast]
        assert all(f["p_value"] > 0.05 for f, s in zip(full, fast) if s["p_value"] == 1.0)


def test_a_run_prints_each_rate_with_its_exact_upper_bound(cal, capsys):
    import re

    assert cal.main(["--only", "refine_smoke", "--experiments", "20"]) == 0
    out = capsys.readouterr().out
    number = r"(\d\.\d{4}) \(upper (\d\.\d{4})\)"
    line = rf"^refine_smoke: false supported {number}, false contradicted {number}, any false {number}$"
    assert re.search(line, out, re.M), out
    assert "null experiments (refine_smoke): 180 over 9 settings (each: 20 to 20)" in out


def test_a_non_inferiority_row_reading_supported_under_the_null_is_no_false_verdict(cal):
    rows = [
        {"verdict": "supported", "direction": "not_below", "margin": 0.03},
        {"verdict": "contradicted", "direction": "not_below", "margin": "0.03"},
        {"verdict": "supported", "direction": "greater", "margin": ""},
    ]
    assert [r["verdict"] for r in cal.false_rows(rows)] == ["contradicted", "supported"]
