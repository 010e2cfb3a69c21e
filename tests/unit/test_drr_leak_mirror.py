"""The leak check on the paper's real data: the prompts and DM rows DRR stores for real rows of
CommonsenseQA, OpenBookQA, PIQA and WinoGrande (read from the benchmark mirror) pass, and the
same records with the gold planted in any shape fail. The rows are those that tripped the old
check: one-word golds that are words of the fixed prompts ("choice", "outside", "list", the
"Question:" label's "question") and
PIQA choices with trailing or doubled spaces (the rendered listing strips them)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from retrace.config.compose import compose
from retrace.drr import leak, leak_text, leakcheck
from retrace.store import data
from tests import prerequisites

MIRROR = Path(prerequisites.MIRROR or Path(__file__).resolve().parent / "no-mirror")
ROWS = {
    "commonsenseqa": [
        "commonsenseqa/ea8664e77205224154f8519f922220e1",  # gold "choice"
        "commonsenseqa/194b66240f6fab75749c1e30ed09ea09",  # gold "outside"
        "commonsenseqa/a74753bf249c1cbcff632c5c16b0397b",
    ],
    # DRR-train questions (drr_paper distils on the train file); gold "question" (the label)
    "commonsenseqa_train": ["commonsenseqa/97e3b40c7beaf142ed20cc834a753904"],
    "openbookqa": ["openbookqa/8-343", "openbookqa/1129", "openbookqa/880"],  # passed before too
    "piqa": ["piqa/1", "piqa/13", "piqa/189", "piqa/355"],  # trailing / doubled spaces
    "winogrande": ["winogrande/929"],  # gold "list"
}


@cache
def problems(dataset: str) -> dict:
    if not MIRROR.is_dir():
        prerequisites.missing("MIRROR", f"no benchmark mirror at {MIRROR} (set RETRACE_MIRROR)")
    loaded, _ = data.prepare(compose({"dataset": dataset})["dataset"], MIRROR)
    return {p.id: p for p in loaded}


def rows(dataset: str) -> list:
    by_id = problems(dataset)
    missing = [i for i in ROWS[dataset] if i not in by_id]
    assert not missing, f"rows gone from the mirror's {dataset}: {missing}"
    return [by_id[i] for i in ROWS[dataset]]


def plants(p) -> dict[str, str]:
    """The gold of `p` planted in every shape the check must catch."""
    g = leak_text.LETTERS.index(p.gold)
    text = leak_text.gold_text(p).strip()
    out = {
        "letter behind a cue": f"Key: {p.gold}",
        "0-based index behind a cue": f"Hint: {g}",
        "1-based index behind a cue": f"Correct: {g + 1}",
        "gold=": f"gold={g + 1}",
        "option text behind a cue": f"Ground truth label: {text}",
        "ordinal": f"The expected option is the {leak_text.ORDINALS[g]} one.",
        "option N": f"The answer is option {g}.",
        "option N is correct": f"Option {g + 1} is correct.",
        "index and text": f"{g}. {text}",
    }
    if len(text) >= leak_text.MIN_CHARS:
        out["bare option text"] = f"Remember: {text} matters here"
    return out


@pytest.mark.parametrize("dataset", sorted(ROWS))
@pytest.mark.parametrize("strategy", ["exploration", "gradual"])
def test_real_rows_pass_clean(dataset, strategy):
    for p in rows(dataset):
        records = leakcheck.rehearsal_records(p, strategy)
        found = [f for r in records for f in leak.scan_record(r, p)]
        assert found == [], (p.id, found[:3])


@pytest.mark.parametrize("dataset", sorted(ROWS))
def test_real_rows_with_a_planted_gold_are_caught(dataset):
    for p in rows(dataset):
        records = leakcheck.rehearsal_records(p, "exploration")
        system = next(r for r in records if r.get("turn") == 1)  # a re-prompt with a past attempt
        dm_row = next(r for r in records if "label" in r)
        for name, plant in plants(p).items():
            prompt = {**system, "messages": [dict(m) for m in system["messages"]]}
            prompt["messages"][0]["content"] += "\n" + plant
            assert leak.scan_record(prompt, p), (p.id, name, "system prompt")
            user = {**system, "messages": [dict(m) for m in system["messages"]]}
            user["messages"][1]["content"] += "\n" + plant
            assert leak.scan_record(user, p), (p.id, name, "user prompt")
            assert leak.scan_record({**dm_row, "text": dm_row["text"] + "\n" + plant}, p), (p.id, name, "DM")


def test_plan_check_rehearses_the_drr_paper_prompts_with_no_findings():
    """`retrace plan --check --experiment drr_paper`: every evaluation prompt of the four
    datasets is built from the mirror and scanned; none carries its gold."""
    from retrace.config.compose import check_global
    from retrace.planning import preflight

    if not MIRROR.is_dir():
        prerequisites.missing("MIRROR", f"no benchmark mirror at {MIRROR}")
    notes: list[str] = []
    failures = preflight.check(check_global({"experiment": "drr_paper", "mirror": str(MIRROR)}), notes)
    leak_notes = [n for n in notes if n.startswith("drr leak check")]
    assert [n.split(":")[0] for n in leak_notes] == [
        f"drr leak check {d}" for d in ("commonsenseqa", "openbookqa", "piqa", "winogrande")
    ]
    assert all(n.endswith(", 0 findings") for n in leak_notes), leak_notes
    assert failures == []
