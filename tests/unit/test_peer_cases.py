"""Maths answer scoring against other projects' test cases (tests/data/peer_cases.jsonl).

Each case is (gold, model output, expected label) transcribed from a public grader's test
suite (Math-Verify, hendrycks/math, Qwen2.5-Math; source cited per case, tests/data/README.md)
or one of the forms issue 53 names. A case retrace decides differently from its source must
be listed, with the convention that explains it, in docs/scoring.md's table: a new
disagreement (or a listed one that went away) fails here, and so does any "correct" verdict
on a case whose label is "wrong" and that the table does not explain.

    PYTHONPATH=src python -m pytest -q tests/unit/test_peer_cases.py -s   # -s prints agreement
"""

import json
import re
from functools import cache
from pathlib import Path

from retrace.util.records import Problem
from retrace.util.registry import TASKS

ROOT = Path(__file__).resolve().parents[2]
CASES = [json.loads(line) for line in (ROOT / "tests/data/peer_cases.jsonl").read_text().splitlines()]
ROW = re.compile(r"^\| `(?P<id>[^`]+)` \| (?P<convention>[a-z-]+) \|", re.MULTILINE)


def dataset_gold(gold: str) -> str:
    """The gold as a dataset row holds it: peers write "$x$"; our loaders drop the "$"
    (tasks/competition_math.py, OlympiadBench.gold)."""
    gold = gold.strip()
    return gold.strip("$").strip() if gold.startswith("$") and gold.endswith("$") else gold


@cache
def verdicts() -> dict[str, bool]:
    task = TASKS.get("olympiadbench")
    out = {}
    for c in CASES:
        problem = Problem(
            "p", "q", dataset_gold(c["gold"]), None, {"is_multiple_answer": c.get("multiple", False)}
        )
        out[c["id"]] = task.is_correct(task.extract_answer(c["output"], problem), problem)
    return out


def documented() -> dict[str, str]:
    text = (ROOT / "docs/scoring.md").read_text()
    table = text.split("## Cases decided differently from their source", 1)[1]
    return {m["id"]: m["convention"] for m in ROW.finditer(table)}


def test_the_suite_is_big_and_cited():
    peers = [c for c in CASES if not c["id"].startswith("issue53/")]
    assert len(peers) >= 200
    assert all(re.match(r"\S+/\S+@[0-9a-f]{7} \S+", c["source"]) for c in peers)
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_every_disagreement_is_documented_and_no_false_positive():
    ours = verdicts()
    differ = {c["id"] for c in CASES if ours[c["id"]] != c["expected"]}
    table = documented()
    assert differ == set(table), (
        f"not in docs/scoring.md: {sorted(differ - set(table))}; listed but agreeing: {sorted(set(table) - differ)}"
    )
    conventions = (ROOT / "docs/scoring.md").read_text()
    for case_id, name in table.items():
        assert f'<a id="{name}"></a>' in conventions, f"{case_id}: convention {name!r} is not stated"


def test_issue_forms_all_hold():
    ours = verdicts()
    wrong = [c["id"] for c in CASES if c["id"].startswith("issue53/") and ours[c["id"]] != c["expected"]]
    assert wrong == []


def test_boxed_agreement_at_least_math_verify():
    """On cases whose output has a \\boxed{}, retrace agrees with the source's label at
    least as often as math-verify's own full parser (parse + verify with its defaults)."""
    from math_verify import parse, verify

    boxed = [c for c in CASES if "\\boxed" in c["output"]]
    ours = sum(verdicts()[c["id"]] == c["expected"] for c in boxed)
    peer = sum(bool(verify(parse(c["gold"]), parse(c["output"]))) == c["expected"] for c in boxed)
    print(f"boxed cases: {len(boxed)}; agreement retrace {ours}, math-verify {peer}")
    assert ours >= peer
