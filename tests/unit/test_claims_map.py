"""The claims maps (retrace/deviations/claims/*.yaml): every headline claim of a paper has a
quoted source and a claims row or a register entry; `retrace deviations --claims` prints them;
a map naming a row or an entry that does not exist is one line each in the check."""

from __future__ import annotations

import pytest
import yaml

from retrace import deviations
from retrace.deviations import claims_map

REGISTERS = ("paper", "drr_paper", "art_paper")


@pytest.mark.parametrize("name", REGISTERS)
def test_every_claim_has_a_quote_and_a_row_or_an_entry_that_exist(name):
    claims = claims_map.load(name)
    assert len(claims) >= 10
    assert all(c["quote"] and c["source"] and (c.get("rows") or c.get("entry")) for c in claims)
    ids = {d["id"] for d in deviations.load(name)["deviations"]}
    assert claims_map.problems(name, ids) == []


def test_the_issues_headline_claims_are_mapped():
    """Issue 52's list: each has a row, or an entry where the experiment cannot test it."""
    rows = {n: {r for c in claims_map.load(n) for r in c.get("rows") or []} for n in REGISTERS}
    entries = {n: {c.get("entry") for c in claims_map.load(n)} for n in REGISTERS}
    assert {"wtl-counts", "nd-tradeoff", "compute-normalised-gain", "vote-suppresses-regressions"} <= entries[
        "paper"
    ]
    assert {"DRR beats SFT-LoRA on FS(1)", "CoT beats Abstain on FS(3)"} <= rows["drr_paper"]
    assert {
        "ART beats few-shot on library tasks",
        "ART beats few-shot on MMLU",
        "ART beats AutoCoT on BIG-bench and MMLU",
        "a library edit helps the edited task",
    } <= rows["art_paper"]
    assert {"feedback-scope", "selection-variant", "fewshot-one-model"} <= entries["art_paper"]


def test_cli_prints_one_claim_line_each(capsys):
    from retrace.cli import main

    assert main(["deviations", "--experiment", "art_paper", "--claims"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(claims_map.load("art_paper")) and all(x.startswith("claim: ") for x in out)
    assert any(
        "over 22 percentage points" in x and "ART beats AutoCoT on BIG-bench and MMLU" in x for x in out
    )


def test_a_missing_row_and_a_missing_entry_are_one_line_each(tmp_path, monkeypatch):
    data = yaml.safe_load(claims_map.path_of("paper").read_text())
    data["claims"][0]["rows"].append("beats everything")
    data["claims"][1]["entry"] = "no-such-entry"
    data["claims"].append({"id": "bare", "claim": "c", "quote": "q", "source": "s", "rows": []})
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setattr(claims_map, "HERE", tmp_path)
    ids = {d["id"] for d in deviations.load("paper")["deviations"]}
    found = claims_map.problems("paper", ids)
    assert [(w.split(": ", 1)[1], why) for w, why in found] == [
        ("claims[0] (consistently-beats-baselines).rows", "no claim row 'beats everything' exists"),
        ("claims[1] (wtl-counts).entry", "no register entry 'no-such-entry' in paper's register"),
        (
            f"claims[{len(data['claims']) - 1}] (bare)",
            "neither a row nor a register entry says how it is tested",
        ),
    ]
