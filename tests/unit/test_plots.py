"""report/plots.py: both figures are written atomically as real, non-trivial PNGs from the
structures the report feeds them (result rows; `diagnose` output)."""

from __future__ import annotations

import pytest
from fake_backend import ExactTask

from retrace.report.plots import (
    accuracy_vs_compute,
    depth_curves,
    depth_records,
    equal_compute_lines,
    job_label,
    method_points,
    point_labels,
    short_labels,
)
from retrace.scoring.refine_diagnostics import diagnose
from retrace.util.records import Problem

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def result_row(dataset, model, method, seed, acc, flops):
    """The keys of report.tables.result_row that the plot reads (and some it does not)."""
    return {
        "dataset": dataset,
        "model": model,
        "method": method,
        "seed": seed,
        "n": 40,
        "accuracy": acc,
        "ci_low": acc - 0.1,
        "ci_high": acc + 0.1,
        "selection": "plurality vote",
        "scorer": "",
        "flops_effective": flops,
    }


def refine_row(pid, *depths):
    return {
        "problem_id": pid,
        "samples": [{"text": t} for t in depths[-1]],
        "extra": {"depths": [[{"text": t} for t in texts] for texts in depths]},
    }


@pytest.fixture(scope="module")
def diagnosed():
    problems = {p: Problem(p, "q", "1") for p in "ab"}
    rows = [
        refine_row("a", ["2", "2", "1"], ["1", "1", "2"], ["1", "1", "1"]),
        refine_row("b", ["1", "1", "2"], ["2", "2", "1"], ["2", "1", "2"]),
    ]
    return diagnose(rows, problems, ExactTask(), n_boot=50)


def assert_png(path, out):
    assert path == out and out.exists()
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5_000
    assert b"Software" not in data  # matplotlib's version tag is stripped
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temp file left


def test_accuracy_vs_compute_png(tmp_path):
    rows = [
        result_row(d, m, meth, 0, a, f)
        for d in ("gsm8k", "math500")
        for m, meth, a, f in [
            ("qwen", "greedy", 0.5, 1e13),
            ("qwen", "refine", 0.6, 8e13),
            ("llama", "majority", 0.4, 2e13),
        ]
    ]
    out = tmp_path / "plots" / "accuracy_vs_compute.png"
    assert_png(accuracy_vs_compute(rows, out), out)


def test_accuracy_vs_compute_zero_flops_still_plots(tmp_path):
    # A fake backend reports no parameters, hence zero FLOPs: no log axis then.
    out = tmp_path / "a.png"
    assert_png(accuracy_vs_compute([result_row("d", "m", "greedy", 0, 0.5, 0)], out), out)


def test_method_points_average_seeds_and_envelope_cis():
    rows = [result_row("d", "m", "greedy", s, a, f) for s, a, f in [(0, 0.5, 1e12), (1, 0.7, 3e12)]] + [
        result_row("d", "m", "refine", 0, 0.6, 1e12)
    ]
    points = {p["method"]: p for p in method_points(rows)}
    g = points["greedy"]
    assert g["n_seeds"] == 2 and g["accuracy"] == pytest.approx(0.6)
    assert (g["ci_low"], g["ci_high"]) == pytest.approx((0.4, 0.8))
    assert g["tflops"] == pytest.approx(2.0)
    assert points["refine"]["n_seeds"] == 1


def test_equal_compute_line_at_refinements_compute(tmp_path):
    rows = [
        result_row("d", "m", "majority", 0, 0.5, 1e12),
        result_row("d", "m", "refine", 0, 0.6, 4e12),
        result_row("d", "m", "majority_eq", 0, 0.55, 4e12),
        result_row("e", "m", "refine", 0, 0.6, 0),
    ]
    lines = equal_compute_lines(method_points(rows))
    assert lines == [{"dataset": "d", "model": "m", "tflops": pytest.approx(4.0)}]
    out = tmp_path / "a.png"
    assert_png(accuracy_vs_compute(rows, out), out)


def test_depth_curves_png_from_diagnose_output(tmp_path, diagnosed):
    job = {"model": "qwen", "backend": "llamacpp", "dataset": "gsm8k", "method": "refine", "seed": 0}
    diags = [
        {"job": job, "depths": diagnosed["depths"]},
        {"job": {**job, "seed": 1}, "depths": diagnosed},
    ]  # diagnose's whole dict works too
    out = tmp_path / "depth_curves.png"
    assert_png(depth_curves(diags, out), out)
    assert depth_records(diags[1]) == diagnosed["depths"]
    assert job_label(job) == "refine · qwen · llamacpp · gsm8k · seed 0"


def test_empty_inputs_refused(tmp_path):
    with pytest.raises(ValueError, match="no score rows"):
        accuracy_vs_compute([], tmp_path / "a.png")
    with pytest.raises(ValueError, match="no refinement diagnostics"):
        depth_curves([], tmp_path / "d.png")
    with pytest.raises(ValueError, match="per-depth"):
        depth_records({"job": {"model": "m"}, "depths": []})
    assert list(tmp_path.iterdir()) == []


def test_methods_on_one_spot_are_named_together_not_over_each_other():
    rows = [
        result_row("d", "m", "greedy", 0, 0.5, 1e12),
        result_row("d", "m", "beam", 0, 0.5, 1.05e12),  # same accuracy, compute within 0.05 decades
        result_row("d", "m", "majority", 0, 0.5, 4e12),
        result_row("d", "m", "refine", 0, 0.75, 4e12),
    ]
    labels = sorted(point_labels(method_points(rows)).values())
    assert labels == [["greedy", "beam"], ["majority"], ["refine"]]


def test_depth_legend_names_only_what_differs_and_the_rest_goes_in_the_title():
    job = {"model": "qwen", "backend": "llamacpp", "dataset": "gsm8k", "method": "refine", "seed": 0}
    jobs = [job, {**job, "method": "refine_affirm"}, {**job, "method": "refine_affirm", "seed": 1}]
    labels, common = short_labels(jobs)
    assert labels == ["refine · seed 0", "refine_affirm · seed 0", "refine_affirm · seed 1"]
    assert common == "qwen · llamacpp · gsm8k"
    assert short_labels([job]) == (["refine · qwen · llamacpp · gsm8k · seed 0"], "")
