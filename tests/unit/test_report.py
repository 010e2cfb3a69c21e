"""build_report: CSV rows and provenance hashes match the files; HTML shows the numbers,
the claims and the refinement diagnostics; the PNGs are written beside it."""

import csv
import json
import re

import pytest
from fake_backend import ExactTask

from retrace.report import build_report
from retrace.report.html import fmt_number
from retrace.scoring.claims import claim_row, write_claims_csv
from retrace.scoring.refine_diagnostics import diagnose
from retrace.store.provenance import prov_path
from retrace.util.atomic import write_json
from retrace.util.hashing import sha256_file
from retrace.util.records import Problem

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cells(tr: str) -> list[str]:
    """The text of each <td> of one table row, tags (links) stripped."""
    return [re.sub(r"<[^>]+>", "", c.split(">", 1)[1].split("</td>", 1)[0]) for c in tr.split("<td")[1:]]


def make_score(tmp_path, model, dataset, method, seed, acc, maj=None, prov=True, **extra):
    score = {
        **extra,
        "job": {"model": model, "dataset": dataset, "method": method, "seed": seed},
        "n_problems": 40,
        "n_samples": 160,
        "accuracy": {"value": acc, "ci_low": acc - 0.1, "ci_high": acc + 0.1},
        "maj@k": maj or {"1": {"value": acc, "ci_low": 0.0, "ci_high": 1.0}},
        "pass@k": {"1": acc},
        "tokens": {
            "prompt": 4000,
            "cached_prompt": 1000,
            "generated": 2500,
            "per_problem_mean_generated": 62.5,
        },
        "flops": {"nominal": 2 * 10**9 * 6500, "effective": 2 * 10**9 * 5500},
    }
    path = tmp_path / "scores" / f"{model}_{dataset}_{method}_{seed}.json"
    write_json(path, score)
    if prov:
        write_json(prov_path(path), {"artifact": {"path": str(path), "sha256": sha256_file(path)}})
    return path


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_csv_rows_and_prov_hashes(tmp_path):
    files = [
        make_score(tmp_path, "qwen", "gsm8k", "greedy", 0, 0.625),
        make_score(
            tmp_path,
            "qwen",
            "gsm8k",
            "majority",
            0,
            0.75,
            maj={"1": {"value": 0.6}, "2": {"value": 0.7}, "4": {"value": 0.75}},
        ),
    ]
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
    files = [make_score(tmp_path, "m", "d", "greedy", s, a) for s, a in [(0, 0.5), (1, 0.7), (2, 0.6)]]
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


def test_backward_compatible_call_writes_accuracy_plot_only(tmp_path):
    f = make_score(tmp_path, "m", "d", "greedy", 0, 0.5)
    out = tmp_path / "report"
    written = build_report([f], out)
    pages = [p for p in written if p.parent.name == "prov"]
    assert [p.read_text().count("Provenance of") for p in pages] == [1]  # the score's record
    assert sorted(p.name for p in written if p not in pages) == [
        "accuracy_vs_compute.png",
        "index.html",
        "results.csv",
    ]
    assert (out / "accuracy_vs_compute.png").read_bytes().startswith(PNG_MAGIC)
    assert not (out / "depth_curves.png").exists()
    html = (out / "index.html").read_text()
    assert '<img src="accuracy_vs_compute.png"' in html
    assert 'id="claims"' not in html and "Refinement diagnostics" not in html


def test_selection_and_scorer_columns(tmp_path):
    old = make_score(tmp_path, "m", "d", "greedy", 0, 0.5)  # written before "selection" existed
    rm = make_score(
        tmp_path,
        "m",
        "d",
        "rm_at_n",
        0,
        0.7,
        selection="chosen by scorer",
        scorer={"name": "llm_judge", "model": "qwen", "params": 5 * 10**8},
    )
    build_report([old, rm], tmp_path / "report")
    rows = {r["method"]: r for r in read_csv(tmp_path / "report" / "results.csv")}
    assert (rows["greedy"]["selection"], rows["greedy"]["scorer"]) == ("plurality vote", "")
    assert (rows["rm_at_n"]["selection"], rows["rm_at_n"]["scorer"]) == ("chosen by scorer", "llm_judge")
    html = (tmp_path / "report" / "index.html").read_text()
    assert "<td>chosen by scorer</td><td>llm_judge</td>" in html
    assert "<td>plurality vote</td><td></td>" in html


def claims_csv(tmp_path):
    """Two real claims rows: refine beats greedy on 20 questions; a 3-question inconclusive one."""
    better = [{f"q{i}": 1.0 for i in range(20)}]
    worse = [{f"q{i}": float(i < 5) for i in range(20)}]
    tiny_a, tiny_b = [{"q0": 1.0, "q1": 0.0, "q2": 1.0}], [{"q0": 0.0, "q1": 0.0, "q2": 1.0}]
    rows = [
        claim_row(
            "beats greedy",
            "qwen",
            "gsm8k",
            "refine",
            "greedy",
            better,
            worse,
            evidence=["a" * 64, "b" * 64],
        ),
        claim_row(
            "beats Maj@N",
            "qwen",
            "gsm8k",
            "refine",
            "majority",
            tiny_a,
            tiny_b,
            evidence=["c" * 64],
        ),
    ]
    path = tmp_path / "claims.csv"
    write_claims_csv(rows, path)
    return path, rows


def test_claims_section(tmp_path):
    path, claims = claims_csv(tmp_path)
    f = make_score(tmp_path, "qwen", "gsm8k", "refine", 0, 0.5)
    build_report([f], tmp_path / "report", claims_csv=path)
    html = (tmp_path / "report" / "index.html").read_text()
    section = html[html.index('<h2 id="claims">') :]
    assert claims[0]["verdict"] == "supported" and claims[1]["verdict"] == "inconclusive"
    for c in claims:  # differences in percentage points
        assert f'class="verdict-{c["verdict"]}"' in section
        assert f"{c['delta'] * 100:+.1f} [{c['ci_low'] * 100:+.1f}, {c['ci_high'] * 100:+.1f}]" in section
        assert f"{c['method']} vs {c['baseline']}" in section
    assert "+75.0" in section  # 20/20 against 5/20
    assert f'<span title="{"a" * 64}">{"a" * 8}</span>' in section  # no record here: no link


def test_claims_csv_missing_columns_refused(tmp_path):
    bad = tmp_path / "claims.csv"
    bad.write_text("claim,model\nx,y\n")
    f = make_score(tmp_path, "m", "d", "greedy", 0, 0.5)
    with pytest.raises(ValueError, match="lacks columns"):
        build_report([f], tmp_path / "report", claims_csv=bad)
    assert not (tmp_path / "report").exists()


def diagnostics_file(tmp_path, seed=0, prov=True):
    """A diagnostics JSON as the diagnose stage writes it: job + diagnose's output."""

    def row(pid, *depths):
        return {
            "problem_id": pid,
            "samples": [{"text": t} for t in depths[-1]],
            "extra": {"depths": [[{"text": t} for t in texts] for texts in depths]},
        }

    problems = {p: Problem(p, "q", "1") for p in "abcd"}
    rows = [
        row("a", ["2", "2", "1"], ["1", "1", "2"]),
        row("b", ["1", "1", "2"], ["2", "2", "1"]),
        row("c", ["1", "1", "1"], ["1", "1", "1"]),
        row("d", ["3", "4", "5"], ["1", "1", "5"]),
    ]
    result = diagnose(rows, problems, ExactTask(), n_boot=50)
    path = tmp_path / "diagnostics" / f"refine_{seed}.json"
    job = {"model": "qwen", "backend": "llamacpp", "dataset": "gsm8k", "method": "refine", "seed": seed}
    write_json(path, {"job": job, **result})
    if prov:
        write_json(prov_path(path), {"artifact": {"path": str(path), "sha256": sha256_file(path)}})
    return path, result["depths"]


def test_diagnostics_table_and_plots(tmp_path):
    path, depths = diagnostics_file(tmp_path)
    f = make_score(tmp_path, "qwen", "gsm8k", "refine", 0, 0.5)
    out = tmp_path / "report"
    written = build_report([f], out, diagnostics=[path])
    for name in ("accuracy_vs_compute.png", "depth_curves.png"):
        assert out / name in written
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5_000
    html = (out / "index.html").read_text()
    section = html[html.index("Refinement diagnostics") :]
    assert '<img src="depth_curves.png"' in section
    body = section[section.index("<tbody>") : section.index("</tbody>")]
    trs = body.split("<tr>")[1:]
    assert len(trs) == len(depths) == 2
    d0, d1 = depths
    # votes: a, d recover and b regresses; rollouts: 5 fixed, 3 broken of 12
    assert (d1["recovery_rate"], d1["regression_rate"]) == (0.5, 0.25)
    assert d1["benefit"] == pytest.approx(2 / 12)
    assert (d0["diversity"], d1["diversity"]) == pytest.approx((2.0 / 3, 1.75 / 3))  # normalised by N=3
    assert cells(trs[0])[3:9] == ["0", fmt_number(d0["accuracy"]), "", "", "", "0.67"]
    assert cells(trs[1])[3:9] == ["1", fmt_number(d1["accuracy"]), "0.500", "0.250", "0.167", "0.58"]
    assert sha256_file(prov_path(path))[:12] in body


def test_diagnostics_without_provenance_refused(tmp_path):
    path, _ = diagnostics_file(tmp_path, prov=False)
    f = make_score(tmp_path, "qwen", "gsm8k", "refine", 0, 0.5)
    with pytest.raises(FileNotFoundError, match="provenance"):
        build_report([f], tmp_path / "report", diagnostics=[path])
    assert not (tmp_path / "report").exists()


def test_n_by_d_grid_table(tmp_path):
    path, _ = diagnostics_file(tmp_path)
    out = tmp_path / "report"
    build_report([make_score(tmp_path, "qwen", "gsm8k", "refine", 0, 0.5)], out, diagnostics=[path])
    html = (out / "index.html").read_text()
    grid = html[html.index("N &times; D grid") :]
    grid = grid[grid.index("<tbody>") : grid.index("</tbody>")]
    rows = [cells(tr) for tr in grid.split("<tr>")[1:]]
    # n = 1, 2, 3 rollouts × depth 0, 1; first rollouts at depth 0: a 2, b 1, c 1, d 3 -> 0.5
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert rows[0][1] == fmt_number(0.5)
    # all three rollouts at depth 1: a 1, b 2, c 1, d 1 -> 0.75
    assert rows[2][2] == fmt_number(0.75)


def test_extraction_path_shares_section(tmp_path):
    sources = {"boxed": 0.5, "statement": 0.25, "fallback": 0.125, "none": 0.125}
    paths = {"boxed": 4, "statement:final-after-box": 2, "fallback:last-span": 1, "none": 1}
    f = make_score(
        tmp_path, "qwen", "math500", "greedy", 0, 0.625, answer_sources=sources, answer_paths=paths
    )
    old = make_score(tmp_path, "qwen", "math500", "majority", 0, 0.5)  # a score without the record
    build_report([f, old], tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text()
    section = html.split('<h2 id="extraction">Answer extraction paths</h2>', 1)[1].split("</table>", 1)[0]
    assert [fmt_number(v) for v in sources.values()] == ["0.500", "0.250", "0.125", "0.125"]
    assert all(f">{fmt_number(v)}<" in section for v in sources.values())
    assert "statement:final-after-box=2" in section and "majority" not in section
    build_report([old], tmp_path / "bare")
    assert "Answer extraction paths" not in (tmp_path / "bare" / "index.html").read_text()
