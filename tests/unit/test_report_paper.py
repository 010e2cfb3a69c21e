"""The report a researcher reads first: summary per paper, the papers' numbers beside ours
with the setting compared, provenance pages reachable from every number and linked up the
lineage. Built on a fixture run (report_fixture.py), no model, no browser."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from report_fixture import build_run

from retrace.art.summary import CLAIMS as ART_CLAIMS
from retrace.drr.claims import CLAIMS as DRR_CLAIMS
from retrace.report import build_report
from retrace.report.paper import load_paper_numbers
from retrace.scoring.claims import PAPER_CLAIMS
from retrace.store.provenance import prov_path
from retrace.util.hashing import sha256_file


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    run = build_run(root)
    out = root / "report_html"
    build_report(run["scores"], out, run["claims"], run["diagnostics"], run["sections"])
    return {"run": run, "out": out, "html": (out / "index.html").read_text()}


def test_every_claim_retrace_tests_is_attributed_to_a_paper():
    listed = load_paper_numbers()["claims"]
    names = (
        [c[0] for c in PAPER_CLAIMS]
        + ["weaker models gain most"]
        + [c[0] for c in DRR_CLAIMS]
        + [c[0] for c in ART_CLAIMS]
        + [c[0] + " (pooled)" for c in ART_CLAIMS]
        + ["a library edit helps the edited task", "a library edit helps the edited task (pooled)"]
    )
    assert [n for n in names if n not in listed] == []
    for name, entry in listed.items():  # a ref or a note that says why there is none
        assert entry["refs"] or entry["note"], name
        for ref in entry["refs"]:
            assert ref["source"] and ref["gain"] is not None, name


def test_reference_numbers_come_from_the_data_file():
    claims = load_paper_numbers()["claims"]
    greedy = claims["beats greedy"]["refs"][0]
    assert (greedy["model"], greedy["dataset"], greedy["baseline"], greedy["method"]) == (
        "qwen2.5-1.5b-instruct",
        "math500",
        29.6,
        58.0,
    )
    drr = {r["dataset"]: r for r in claims["DRR beats CoT on accuracy"]["refs"]}
    assert (drr["all"]["method"], drr["all"]["baseline"], drr["piqa"]["questions"]) == (81.8, 72.5, 1838)
    assert claims["ART beats few-shot on unseen tasks"]["refs"][0]["gain"] == 10.8


def test_bad_data_file_names_the_entry(tmp_path):
    bad = tmp_path / "numbers.yaml"
    bad.write_text("papers: {refine: {title: t}}\nclaims:\n  - {claim: x, paper: nope}\n")
    with pytest.raises(ValueError, match=r"numbers.yaml: claims\[0\] \('x'\): paper 'nope'"):
        load_paper_numbers(bad)
    bad.write_text(
        "papers: {refine: {title: t}}\nclaims:\n  - {claim: x, paper: refine, refs: [{methd: 1, source: s}]}\n"
    )
    with pytest.raises(ValueError, match="unknown key"):
        load_paper_numbers(bad)


def test_summary_counts_and_plain_lines(report):
    html = report["html"]
    summary = html[html.index('id="summary"') : html.index('id="claims"')]
    refine = summary[summary.index("Refining over Resampling") : summary.index("DRR:")]
    # Holm-corrected exact tests (retrace.scoring.claims); no "weaker models" row without claims.weaker
    assert "2 supported" in refine and "0 contradicted" in refine and "2 inconclusive" in refine
    assert (
        "beats greedy (qwen2.5-1.5b-instruct, math500): supported; refine minus greedy = +52.5 pp" in refine
    ) and "the paper reported +28.4 pp (Qwen2.5-1.5B, math500)" in refine
    # ART's 15 vs 11 of 20 is 4 wins, 0 losses: sign-test p = 0.125, so not supported
    assert (
        "0 supported" in summary[summary.index("ART:") :]
        and "1 inconclusive" in summary[summary.index("ART:") :]
    )


def claim_row_html(html: str, claim: str, model: str) -> str:
    table = html[html.index('id="claims-table"') : html.index('id="results"')]
    group = table[table.index(f"&mdash; {model} / math500") :]
    return group[group.index(f"<td>{claim}<br>") :].split("</tr>", 1)[0]


def test_paper_vs_ours_with_setting_and_p_adj(report):
    row = claim_row_html(report["html"], "beats greedy", "qwen2.5-1.5b-instruct")
    # ours, pp; the approximate CI at the row's Holm level (Agresti-Min pseudo-pairs: centre pulled to 0)
    assert "+52.5 [+11.5, +84.0]" in row
    # 20 questions: a wide CI at the Holm level
    assert "<strong>+28.4</strong> (58.0 vs 29.6)" in row and "inside our CI" in row
    assert "29.6% to 58.0%" in row  # the citation travels with the number
    assert '<span class="same">&#10003; model</span>' in row
    assert "&#10007; questions</span> (20 vs 500)" in row
    assert "&#10007; N</span> (4 vs 8)" in row and "&#10007; D</span> (2 vs 4)" in row
    # the p cell shows claims.csv's Holm-adjusted p in brackets, whatever the family's size
    import csv

    with open(report["run"]["claims"]) as f:
        p_adj = next(float(r["p_adjusted"]) for r in csv.DictReader(f) if r["claim"] == "beats greedy")
    shown = re.search(r'<td class="num" title="[^"]*">[^<(]+ \(([^)]+)\)</td>', row)
    assert "p<sub>adj</sub>" in report["html"] and shown, row
    assert float(shown.group(1)) == pytest.approx(p_adj, rel=0.05)
    other = claim_row_html(report["html"], "beats greedy", "smollm2-135m-q41")
    assert "&#10007; model</span> (smollm2-135m-q41 vs Qwen2.5-1.5B)" in other


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]*)"', html)


def test_every_link_resolves_and_numbers_lead_to_their_record(report):
    out, html = report["out"], report["html"]
    links = hrefs(html)
    assert links and all((out / h).is_file() for h in links), [h for h in links if not (out / h).is_file()]
    score = report["run"]["scores"][0]
    page = f"prov/{sha256_file(prov_path(score))[:16]}.html"
    assert f'<a href="{page}" title="prov sha256' in html
    for p in (out / "prov").glob("*.html"):
        assert all((p.parent / h).is_file() for h in hrefs(p.read_text())), p


def test_provenance_page_shows_record_and_lineage(report):
    out = report["out"]
    score = report["run"]["scores"][-1]  # a refine score: generate record upstream has N, D
    page = (out / f"prov/{sha256_file(prov_path(score))[:16]}.html").read_text()
    assert f"Provenance of <code>{score}</code>" in page and "score" in page
    ups = re.findall(r'class="up" href="([^"]+)"', page)
    assert len(ups) == 3  # generations, data file, model manifest
    texts = [htmllib.unescape((out / "prov" / u).read_text()) for u in ups]
    gen = next(t for t in texts if "generations" in t.split("</h1>")[0])
    assert '"depth": 2' in gen and '"n": 4' in gen  # config slice
    assert any("data_fingerprint" in t for t in texts)  # data fingerprint section
    assert any("model_fingerprint" in t for t in texts)
    assert re.search(r'class="down" href="[0-9a-f]{16}\.html"', gen)  # and back down
    assert "commit <code>" in page and re.search(r"<th>timing</th><td>[0-9.]+ s</td>", page)


def test_report_stage_records_every_page_and_the_lineage_audits(tmp_path):
    from retrace.stages import report as report_stage
    from retrace.store.provenance import audit

    run = build_run(tmp_path)
    out = tmp_path / "out"
    report_stage.run(run["scores"], out, run["claims"], run["diagnostics"], run["sections"])
    pages = list((out / "prov").glob("*.html"))
    assert pages and all(prov_path(p).exists() for p in pages)
    node = audit(out / "index.html")
    assert node.all_ok(), "\n".join(node.lines())


def test_a_reference_comes_only_from_the_same_dataset():
    from retrace.report.paper import pick_ref

    refs = [
        {"model": "m1", "dataset": "a", "source": "s"},
        {"model": "m2", "dataset": "a", "source": "t"},
        {"model": "m2", "dataset": "all", "source": "u"},
    ]
    assert pick_ref(refs, "m2", "a")["source"] == "t"
    assert pick_ref(refs, "m3", "a")["source"] == "s"  # another model, same dataset
    assert pick_ref(refs, "m2", "all")["source"] == "u"
    assert pick_ref(refs, "m1", "smoke_mc_all") is None  # never a number from another dataset
