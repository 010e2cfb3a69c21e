"""The hooks method families (DRR, ART) plug into: extra claims CSVs, report sections, CLI."""

from __future__ import annotations

import csv
import json

import pytest

from retrace import cli
from retrace.report.sections import load_sections
from retrace.scoring.claims import claim_row, write_claims_csv
from retrace.stages import claims
from retrace.store.provenance import Provenance, audit_results_table, prov_path
from retrace.util.hashing import sha256_file


def family_claims(tmp_path):
    """A family's claims CSV whose evidence is the record of one of its own inputs."""
    score = tmp_path / "fam_score.json"
    score.write_text("{}")
    Provenance("fam_score", {}, {}).write(score)
    out = tmp_path / "fam_claims.csv"
    row = claim_row(
        "fam beats base",
        "m",
        "d",
        "fam",
        "base",
        [{f"q{i}": 1.0 for i in range(12)}],
        [{f"q{i}": float(i % 2) for i in range(12)}],
        evidence=[sha256_file(prov_path(score))],
    )
    write_claims_csv([row], out)
    Provenance("fam_claims", {}, {}, inputs=[str(score)]).write(out)
    return out


def test_extra_claims_are_merged_and_their_evidence_audits_through_the_lineage(tmp_path):
    out = tmp_path / "claims.csv"
    assert claims.run([], out, [family_claims(tmp_path)]) == 1
    (row,) = list(csv.DictReader(open(out)))
    assert (row["claim"], row["verdict"]) == ("fam beats base", "supported")
    assert audit_results_table(out) == []
    # a hash that is no record in the lineage is named with its line
    text = out.read_text().replace(row["evidence"][:12], "0" * 12)
    out.write_text(text)
    Provenance("claims", {}, {}, inputs=[str(tmp_path / "fam_claims.csv")]).write(out)
    assert "claims.csv:2" in audit_results_table(out)[0]


def test_extra_claims_without_required_columns_name_the_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("claim,delta\nx,1\n")
    with pytest.raises(ValueError, match="bad.csv:2"):
        claims.run([], tmp_path / "claims.csv", [bad])


def test_sections_are_checked_and_images_copied(tmp_path):
    img = tmp_path / "curve.png"
    img.write_bytes(b"png")
    sec = tmp_path / "s.json"
    sec.write_text(
        json.dumps(
            {
                "title": "DRR: loop",
                "tables": [{"caption": "c", "columns": ["a", "b"], "rows": [[1, 0.5]], "prov": ["f" * 64]}],
                "images": [str(img)],
            }
        )
    )
    (loaded,), copies = load_sections([sec], tmp_path / "out")
    assert loaded["images"] == ["drr-loop-curve.png"] and copies[0][0] == img
    sec.write_text(json.dumps({"title": "x", "tabels": []}))
    with pytest.raises(ValueError, match="s.json: unknown section key"):
        load_sections([sec], tmp_path)
    sec.write_text(json.dumps({"title": "x", "tables": [{"columns": ["a"], "rows": [[1, 2]]}]}))
    with pytest.raises(ValueError, match=r"rows\[0\] has 2 cells"):
        load_sections([sec], tmp_path)


def test_family_commands_dispatch_to_their_module():
    from retrace.config.families import FAMILIES, Family

    seen = []

    @FAMILIES.register("fam")
    class Fam(Family):
        def commands(self):
            return {"fam": lambda argv: seen.append(argv) or 3}

    try:
        assert cli.main(["fam", "train", "--x", "1"]) == 3 and seen == [["train", "--x", "1"]]
    finally:
        FAMILIES.unregister("fam")


def test_a_section_table_without_provenance_or_caption_renders(tmp_path):
    from retrace.report.html import render_html

    sec = tmp_path / "s.json"
    sec.write_text(json.dumps({"title": "Plain", "tables": [{"columns": ["a"], "rows": [[0.25]]}]}))
    sections, _ = load_sections([sec], tmp_path)
    html = render_html([], [], images={"accuracy_vs_compute": "a.png"}, sections=sections)
    assert (
        '<h2 id="plain">Plain</h2>' in html
        and "0.250" in html
        and "provenance</th>" not in html.split("Plain")[1]
    )
