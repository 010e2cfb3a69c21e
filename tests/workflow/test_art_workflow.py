"""ART end to end on a real small model (SmolLM2-135M, experiment `art_plumbing`), then
library edits as versioned inputs: a dry-run after editing one demonstration file plans
exactly the ART runs whose prompts contain it (plus the summary and report downstream)."""

from __future__ import annotations

import csv
import json
import os
import re

import pytest

from tests.workflow.conftest import assert_relocatable, edited, planned_outputs, retrace, snakemake
from tests.workflow.experiments import WORDS

pytestmark = pytest.mark.slow

LIB = "src/retrace/art/library"
RUNS = "art/smollm2-135m-q40"


def test_art_smoke_runs_every_method_and_audits(art_run):
    root = art_run
    audit = retrace(
        root, "audit", "results/report/results.csv", "results/report/claims.csv", "results/report/index.html"
    )
    assert "audit: OK" in audit.stdout, audit.stdout[-3000:]
    claims = {r["claim"] for r in csv.DictReader(open(root / "results/report/claims.csv"))}
    assert {
        "ART beats few-shot on unseen tasks",
        "ART beats AutoCoT",
        "tools help",
        "self-consistency helps",
        "a library edit helps the edited task",
    } <= claims
    assert "ART: programs with tool calls" in (root / "results/report/index.html").read_text()
    rec = json.loads(
        (root / f"results/{RUNS}/word_unscrambling/art@feedback/seed0.jsonl.prov.json").read_text()
    )
    inputs = {i["path"] for i in rec["inputs"]}
    # the run traces back to the library files it read, the selection, the data and the model
    assert f"{LIB}/feedback/string_ops/word_unscrambling.txt" in {p[p.find("src/") :] for p in inputs}
    # the feedback version has its own index.yaml (it adds the human-written task): its own selection
    assert any(p.endswith("selection/feedback.json") for p in inputs)
    assert any(p.endswith("bigbench_word_unscrambling.jsonl") for p in inputs)
    assert any(p.endswith("manifest.json") for p in inputs)
    assert (
        rec["library"]["version"] == "feedback"
        and rec["tools"]["search"]["collection"] == "retrace-passages-v1"
    )
    # provenance names the runtime and the digest of the compiled module that ran it
    from retrace.tools import wasm_exec

    ran = rec["tools"]["code_execute"]
    assert ran["runtime_sha256"] == wasm_exec.RUNTIME_SHA256
    assert ran["module_sha256"] == wasm_exec.describe()["module_sha256"]
    rows = [
        json.loads(line)
        for line in (root / f"results/{RUNS}/arithmetic/art/seed0.jsonl").read_text().splitlines()
    ]
    seg = rows[0]["trace"]["segments"][0]
    assert "\n#" in seg["prompt_tail"] or seg["prompt_tail"].endswith("Q1:")


TOOL_USERS = {"art", "art_regenerate", "art_sc", "art@feedback"}


def _planned_art_labels(root) -> set[tuple[str, str]]:
    return {
        (p.split("/")[2], p.split("/")[3])
        for p in planned_outputs(root)
        if p.startswith(RUNS) and "/selection/" not in p
    }


def _restore(path, text, stat):
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_editing_a_tools_data_or_adding_a_tool_reruns_the_art_jobs_that_use_tools(art_run):
    root = art_run
    coll = root / "src/retrace/tools/collections/retrace-passages-v1.jsonl"
    words, tool_module = root / WORDS, root / "src/retrace/tools/calculator.py"
    saved = {f: (f.read_text(), f.stat()) for f in (coll, words)}
    edits = {coll: lambda t: t.replace("telegram", "telegraph", 1), words: lambda t: t + "tac\n"}
    try:
        for f, edit in edits.items():
            before = _planned_art_labels(root)
            f.write_text(edit(saved[f][0]))
            planned = _planned_art_labels(root) - before
            _restore(f, *saved[f])
            # exactly the jobs that construct the tools, on both tasks; never fewshot/autocot/notools
            assert {label for _, label in planned} == TOOL_USERS, (f.name, planned)
            assert {t for t, _ in planned} == {"arithmetic", "word_unscrambling"}
        before = _planned_art_labels(root)
        tool_module.write_text('"""A tool added by a user (registers nothing yet)."""\n')
        labels = {label for _, label in _planned_art_labels(root) - before}
        assert labels == TOOL_USERS | {"art_notools"}  # the programs' code changed; baselines untouched
    finally:
        for f, (text, stat) in saved.items():
            _restore(f, text, stat)
        tool_module.unlink(missing_ok=True)


def test_editing_one_demonstration_reruns_only_the_art_jobs_that_use_it(art_run):
    root = art_run
    assert not planned_outputs(root), "a finished run must plan nothing"
    # a demonstration that no selected prompt contains reruns no ART run: only the checks that
    # read the whole library (demonstration leaks, unseen-task overlap) and what shows them
    unused = root / LIB / "base/reasoning/logical_deduction.txt"
    with edited(unused, lambda t: t.replace("Deduce the order", "Work out the order")):
        planned = planned_outputs(root)
        assert not {p for p in planned if p.startswith(RUNS)}, planned
        assert "art/summary/leakcheck.json" in planned
    edited_demo = root / LIB / "feedback/string_ops/word_unscrambling.txt"
    with edited(edited_demo, lambda t: t.replace("most common English word", "most frequent English word")):
        planned = planned_outputs(root)
        art_runs = {p for p in planned if p.startswith(RUNS) and "/selection/" not in p}
        assert art_runs == {f"{RUNS}/word_unscrambling/art@feedback/seed0.jsonl"}
        assert "art/summary/claims.csv" in planned and "report/index.html" in planned
        # a base task that the unseen task's base selection chose, and the feedback one did not
        # (similarity: [language_games, kth_letter_concatenation] vs [word_unscrambling,
        # language_games]): read by the base-library runs of the unseen task only
        base = root / LIB / "base/string_ops/kth_letter_concatenation.txt"
        with edited(base, lambda t: t.replace("joins the letter", "joins each letter")):
            art_runs = {p for p in planned_outputs(root) if p.startswith(RUNS)}
    assert {p.split("/")[3] for p in art_runs} == {
        "art",
        "art_regenerate",
        "art_notools",
        "art_sc",
        "art@feedback",
    }
    assert all("/word_unscrambling/" in p for p in art_runs)


def test_the_leak_check_reads_the_task_descriptions_and_the_main_index(art_run):
    """eval_tasks.yaml and the main version's index.yaml are inputs of the leak check (the
    unseen-task check compares their descriptions): editing eval_tasks.yaml without changing
    any task (a comment) plans the check and what shows it, no ART run."""
    root = art_run
    leak = "results/art/summary/leakcheck.json"
    forced = snakemake(root, "-n", "-f", leak).stdout
    inputs = {
        f.strip() for m in re.finditer(r"^\s+input: (.+)$", forced, re.M) for f in m.group(1).split(",")
    }
    assert {f"{LIB}/eval_tasks.yaml", f"{LIB}/base/index.yaml"} <= inputs, forced[-2000:]
    assert f"{LIB}/feedback/string_ops/word_unscrambling.txt" in inputs  # every version's inputs
    with edited(root / LIB / "eval_tasks.yaml", lambda t: t + "# a comment\n"):
        planned = planned_outputs(root)
    assert "art/summary/leakcheck.json" in planned and "report/index.html" in planned
    assert not {p for p in planned if p.startswith(RUNS)}, planned
    assert not planned_outputs(root), "the run is finished again once the edit is undone"


def test_changing_an_art_setting_reruns_the_art_runs(art_run):
    root = art_run
    with edited(root / "config/experiment/art_plumbing.yaml", lambda t: t.replace("sc_k: 2", "sc_k: 3")):
        planned = {p for p in planned_outputs(root) if p.startswith(RUNS) and "/selection/" not in p}
    assert {f"{RUNS}/{t}/art_sc/seed0.jsonl" for t in ("arithmetic", "word_unscrambling")} <= planned
    assert not planned_outputs(root), "the run is finished again once the edits are undone"


def test_a_copied_art_run_is_finished_and_audits_its_own_files(art_run, tmp_path):
    assert_relocatable(
        art_run, tmp_path / "moved", ["results/report/results.csv", "results/report/claims.csv"]
    )
