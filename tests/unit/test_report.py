"""build_report: CSV rows and provenance hashes match the files; HTML shows the numbers."""
import csv
import json

import pytest

from retrace.atomic import write_json
from retrace.hashing import sha256_file
from retrace.provenance import prov_path
from retrace.report import build_report
from retrace.report.html import fmt_number


def make_score(tmp_path, model, dataset, method, seed, acc, maj=None, prov=True):
    score = {"job": {"model": model, "dataset": dataset, "method": method, "seed": seed},
             "n_problems": 40, "n_samples": 160,
             "accuracy": {"value": acc, "ci_low": acc - 0.1, "ci_high": acc + 0.1},
             "maj@k": maj or {"1": {"value": acc, "ci_low": 0.0, "ci_high": 1.0}},
             "pass@k": {"1": acc},
             "tokens": {"prompt": 4000, "cached_prompt": 1000, "generated": 2500,
                        "per_problem_mean_generated": 62.5},
             "flops": {"nominal": 2 * 10**9 * 6500, "effective": 2 * 10**9 * 5500}}
    path = tmp_path / "scores" / f"{model}_{dataset}_{method}_{seed}.json"
    write_json(path, score)
    if prov:
        write_json(prov_path(path), {"artifact": {"path": str(path),
                                                  "sha256": sha256_file(path)}})
    return path


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_csv_rows_and_prov_hashes(tmp_path):
    files = [make_score(tmp_path, "qwen", "gsm8k", "greedy", 0, 0.625),
             make_score(tmp_path, "qwen", "gsm8k", "majority", 0, 0.75,
                        maj={"1": {"value": 0.6}, "2": {"value": 0.7}, "4": {"value": 0.75}})]
    out = tmp_path / "report"
    build_report(files, out)
    rows = read_csv(out / "results.csv")
    assert [r["method"] for r in rows] == ["greedy", "majority"]
    for r, f in zip(rows, files):
        assert r["score_file"] == str(f)
        assert r["prov_sha256"] == sha256_file(prov_path(f))
        assert r["n"] == "40" and r["generated_tokens"] == "2500"
    assert rows[1]["maj@4"] == "0.75" and rows[0]["maj@4"] == ""
    assert rows[1]["accuracy"] == "0.75" and rows[1]["flops_effective"] == str(2 * 10**9 * 5500)
    header = list(rows[0])
    assert header.index("maj@1") < header.index("maj@4") < header.index("pass@1")


def test_html_shows_numbers_and_short_hashes(tmp_path):
    f = make_score(tmp_path, "qwen", "math500", "greedy", 0, 0.625)
    build_report([f], tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text()
    full = sha256_file(prov_path(f))
    assert "0.625 [0.525, 0.725]" in html
    assert full[:12] in html and f"prov sha256 {full}" in html
    assert "2,500" in html and fmt_number(2 * 10**9 * 5500) in html
    assert "math500" in html and "Across seeds" not in html


def test_seed_aggregate_table(tmp_path):
    files = [make_score(tmp_path, "m", "d", "greedy", s, a)
             for s, a in [(0, 0.5), (1, 0.7), (2, 0.6)]]
    build_report(files, tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Across seeds" in html
    assert "0.600 &plusmn; 0.100" in html  # mean 0.6, sample sd 0.1
    assert len(read_csv(tmp_path / "report" / "results.csv")) == 3


def test_seeds_sort_numerically(tmp_path):
    files = [make_score(tmp_path, "m", "d", "greedy", s, 0.5) for s in (10, 2)]
    build_report(files, tmp_path / "report")
    assert [r["seed"] for r in read_csv(tmp_path / "report" / "results.csv")] == ["2", "10"]


def test_missing_prov_record_is_refused(tmp_path):
    f = make_score(tmp_path, "m", "d", "greedy", 0, 0.5, prov=False)
    with pytest.raises(FileNotFoundError, match="provenance"):
        build_report([f], tmp_path / "report")
    assert not (tmp_path / "report" / "results.csv").exists()


def test_missing_job_fields_and_duplicates_refused(tmp_path):
    f = make_score(tmp_path, "m", "d", "greedy", 0, 0.5)
    score = json.loads(f.read_text())
    del score["job"]["seed"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(score))
    with pytest.raises(ValueError, match="job fields"):
        build_report([bad], tmp_path / "report")
    with pytest.raises(ValueError, match="two score files"):
        build_report([f, f], tmp_path / "report")


def test_html_escapes_names(tmp_path):
    f = make_score(tmp_path, "a<b", "d", "greedy", 0, 0.5)
    build_report([f], tmp_path / "report")
    assert "a&lt;b" in (tmp_path / "report" / "index.html").read_text()
