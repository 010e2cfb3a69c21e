"""Gold fixes (retrace.tasks.gold_fix): applied at loading, recorded, refused when stale;
golds math-verify cannot parse listed by `retrace plan --check`."""

import json

import pytest

from retrace.planning import preflight
from retrace.tasks import gold_fix
from retrace.tasks._math import unparsable
from retrace.util.records import Problem
from retrace.util.registry import TASKS
from tests import prerequisites


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A gold-fix table for task "olympiadbench" in a temporary directory."""
    monkeypatch.setattr(gold_fix, "FIXES_DIR", tmp_path)
    gold_fix.fixes.cache_clear()
    yield tmp_path / "olympiadbench.yaml"
    gold_fix.fixes.cache_clear()


def test_fix_applies_and_keeps_the_original(table):
    table.write_text('fixes:\n  - {id: ob/7, gold: "t(0,4]", fixed: "(0,4]", reason: "a typo"}\n')
    fixed = gold_fix.apply_fix("olympiadbench", Problem("ob/7", "q", "t(0,4]"), "f.jsonl:3")
    assert fixed.gold == "(0,4]"
    assert fixed.metadata["gold_fix"] == {"from": "t(0,4]", "reason": "a typo"}
    assert gold_fix.fixed_golds([fixed, Problem("ob/8", "q", "1")]) == [
        {"id": "ob/7", "from": "t(0,4]", "to": "(0,4]", "reason": "a typo"}
    ]
    assert gold_fix.apply_fix("olympiadbench", Problem("ob/8", "q", "1"), "x") == Problem("ob/8", "q", "1")


def test_stale_fix_is_an_error_naming_table_and_row(table):
    table.write_text('fixes:\n  - {id: ob/7, gold: "t(0,4]", fixed: "(0,4]", reason: "a typo"}\n')
    with pytest.raises(
        ValueError, match=r"f.jsonl:3: gold fix 'ob/7' .*olympiadbench.yaml.* the data has '\(0,5\]'"
    ):
        gold_fix.apply_fix("olympiadbench", Problem("ob/7", "q", "(0,5]"), "f.jsonl:3")


def test_malformed_table_names_the_entry(table):
    table.write_text("fixes:\n  - {id: ob/7, gold: x}\n")
    with pytest.raises(
        ValueError, match=r"olympiadbench.yaml: fixes\[0\]: missing or not text: fixed, reason"
    ):
        gold_fix.fixes("olympiadbench")


def test_unparsable_golds_are_listed(monkeypatch):
    good, bad = Problem("a", "q", "n^{2}-n-1"), Problem("b", "q", "\\begin{cases} x")
    assert unparsable([good, bad]) == [bad]
    monkeypatch.setattr(preflight, "compose", lambda sel: {"dataset": {"task": "math500", "name": "x"}})
    monkeypatch.setattr("retrace.planning.plan.jobs", lambda cfg: [type("J", (), {"dataset": "x"})])
    monkeypatch.setattr("retrace.store.data.prepare", lambda cfg, mirror: ([good, bad], []))
    [line] = preflight.gold_notes({"experiment": "e"})
    assert line == "x: 1 of 2 golds math-verify cannot parse: b '\\\\begin{cases} x'"


def test_olympiadbench_golds_fixed_at_loading_match_their_answers(tmp_path):
    """The two golds of issue 53, from the mirror, through the data stage (provenance)."""
    from retrace.stages.data import run

    mirror = prerequisites.mirror()
    out = tmp_path / "ob.jsonl"
    run("olympiadbench", str(mirror), out)
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    task = TASKS.get("olympiadbench")
    m_max, t_range = (Problem.from_dict(rows[f"olympiadbench/{i}"]) for i in (1782, 2045))
    assert task.is_correct(task.extract_answer("so the largest is \\boxed{n^2-n-1}", m_max), m_max)
    assert task.is_correct(task.extract_answer("Hence \\boxed{t \\in (0, 4]}.", t_range), t_range)
    assert not task.is_correct("(0, 4)", t_range)
    prov = json.loads((tmp_path / "ob.jsonl.prov.json").read_text())
    assert [f["id"] for f in prov["data"]["gold_fixes"]] == ["olympiadbench/1782", "olympiadbench/2045"]


@pytest.mark.parametrize(
    "pid, right, wrong, needed",
    [
        # the `name = value` rule of _math.parsed already reads this gold's value; the fix
        # states it in the data
        ("olympiadbench/1782", ["n^2-n-1", "m_{\\max} = n^2 - n - 1", "n(n-1)-1"], ["n^2-n", "1"], False),
        ("olympiadbench/2045", ["(0,4]", "t \\in (0, 4]", "(0, 4]"], ["(0,4)", "[0,4]", "4"], True),
    ],
)
def test_the_shipped_table_fixes_match_their_answers(pid, right, wrong, needed):
    """Without the mirror: the shipped OlympiadBench fixes, applied to the golds the data
    holds, accept the right answers and refuse near misses (issue 53)."""
    gold_fix.fixes.cache_clear()
    fix = gold_fix.fixes("olympiadbench")[pid]
    task = TASKS.get("olympiadbench")
    problem = gold_fix.apply_fix("olympiadbench", Problem(pid, "q", fix["gold"]), "row")
    assert [task.is_correct(a, problem) for a in right] == [True] * len(right)
    assert [task.is_correct(a, problem) for a in wrong] == [False] * len(wrong)
    unfixed = Problem(pid, "q", fix["gold"])
    assert task.is_correct(right[0], unfixed) is not needed  # what the fix is for
