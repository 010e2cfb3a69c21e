"""DRR's claims under the two abstention conventions (drr/claims.py claim_list)."""

import pytest

from retrace.drr.claims import WRONG_SUFFIX, claim_list, claims


def _ep(i: int, status: str, correct: bool) -> dict:
    turn = {"answer": "A" if correct else "B", "correct": correct, "decision": "reject"}
    return {"id": f"q{i}", "status": status, "turns": [turn]}


def _runs():
    """12 questions: DRR abstains on every one, its last attempt right on all; CoT answers
    the even-numbered ones right. Abstain = last attempt: DRR 12/12; abstain = wrong: 0/12."""
    drr = [_ep(i, "abstained", True) for i in range(12)]
    cot = [_ep(i, "answered", i % 2 == 0) for i in range(12)]
    return {("m", "d"): {"drr": [drr], "cot": [cot]}}, {("m", "d"): {"drr": ["h1"], "cot": ["h2"]}}


def test_both_conventions_table1s_under_the_papers_name_and_abstain_wrong_beside():
    runs, hashes = _runs()
    rows = {r["claim"]: r for r in claims(runs, hashes, "both")}
    paper, wrong = rows["DRR beats CoT on accuracy"], rows["DRR beats CoT on accuracy" + WRONG_SUFFIX]
    assert paper["delta"] == pytest.approx(1.0 - 0.5)  # abstentions scored as their last attempt
    assert wrong["delta"] == pytest.approx(0.0 - 0.5)  # abstentions scored wrong
    assert "last attempt" in paper["note"] and "an abstention wrong" in wrong["note"]
    # FS scores an abstention 0 in both conventions: one FS(1) row, DRR 0 vs CoT 6 - 6 = 0
    assert rows["DRR beats CoT on FS(1)"]["delta"] == pytest.approx(0.0)
    assert not any(c.startswith("DRR beats CoT on FS") and c.endswith(WRONG_SUFFIX) for c in rows)


def test_the_default_convention_scores_an_abstention_wrong_under_one_name():
    runs, hashes = _runs()
    rows = {r["claim"]: r for r in claims(runs, hashes)}
    assert rows["DRR beats CoT on accuracy"]["delta"] == pytest.approx(-0.5)
    assert not any(c.endswith(WRONG_SUFFIX) for c in rows)
    with pytest.raises(ValueError, match="drr.acc_abstention: 'last'; valid: wrong, both"):
        claim_list("last")


def test_drr_paper_writes_both_conventions():
    from retrace.config.compose import load_experiment
    from retrace.drr import settings

    cfg = settings.load(load_experiment("drr_paper")["drr"])
    names = [c[0] for c in claim_list(cfg["acc_abstention"])]
    for base in ("CoT", "Abstain", "Self-Critic", "SFT-LoRA"):
        assert (
            f"DRR beats {base} on accuracy" in names
            and f"DRR beats {base} on accuracy{WRONG_SUFFIX}" in names
        )
