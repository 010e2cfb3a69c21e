"""A tiny rehearsal end to end (retrace.app.rehearse_workflow): the real Snakefile on the simulated
engine, no model. One model, MATH-500 cut to 60 questions, greedy / Maj@3 / refine / always-affirm
refine; refinement planted 40 points above the rest. The run must carry the planted effect
through generate -> score -> claims -> report -> audit, and read the null row as not supported.
About 11 jobs: slow on a loaded machine (~1 min at load 2), so marked slow.
The DRR rehearsal runs drr_paper's DAG at scale 0.02 with DRR planted +20 points on
CommonsenseQA only: every DRR row must carry its truth, no null row may read supported, and the
run must say everywhere that its reasoner and discriminator were simulated.
The ART rehearsal runs a small ART experiment (one library and one unseen task, 30 test items
each) with ART planted 40 points above few-shot and ART without tools: the simulated engine
writes the programs, their code steps really run, and the claims must carry the planted effect
and read the null row (pausing vs regenerating, both planted alike) as not supported."""

from __future__ import annotations

import csv
import re
import shutil

import pytest

from retrace.app import rehearse, rehearse_workflow
from retrace.config.compose import CONFIG_DIR
from retrace.drr.claims import WRONG_SUFFIX
from tests import prerequisites
from tests.workflow.conftest import MIRROR

TINY = """\
runs:
  - models: [qwen2.5-1.5b-instruct]
    backend: vllm
    datasets: [math500]
    seeds: [0]
    overrides: [backend.engine.max_model_len=32768]   # dropped by the rehearsal (an engine setting)
    methods:
      - greedy
      - {label: majority, overrides: [method.n=3]}
      - {label: refine, overrides: [method.n=3, method.depth=1]}
      - {label: refine_affirm, method: refine, overrides: [method.n=3, method.depth=1, method.critic=affirm]}
  # A second model in its own rules (one generate_cell and one score rule per model and label
  # set, made in a loop): each job must run its own rule's model. Only greedy, so no claim row.
  - models: [llama-3.1-8b-instruct]
    backend: vllm
    datasets: [math500]
    seeds: [0]
    methods: [greedy]
"""


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rehearse")
    config = config_with(tmp, "rehearse_tiny", TINY)
    return finished_rehearsal(
        tmp, "rehearse_tiny", 0.12, "effects:\n  - {label: refine, points: 40}\n", config
    )


def config_with(tmp, experiment: str, text: str):
    """A copy of the shipped config/ under `tmp` with one more experiment file."""
    config = tmp / "config"
    shutil.copytree(CONFIG_DIR, config)
    (config / "experiment" / f"{experiment}.yaml").write_text(text)
    return config


def finished_rehearsal(tmp, experiment: str, scale: float, effects_yaml: str, config_dir=CONFIG_DIR):
    """Derive the rehearsal of `experiment` with these planted effects, run its workflow on 2
    cores; (run directory, effects file, run stats)."""
    prerequisites.mirror()  # the rehearsals derive from mirror datasets (MATH-500, drr_paper's, BIG-bench)
    effects = tmp / "effects.yaml"
    effects.write_text(effects_yaml)
    root = rehearse_workflow.derive(experiment, scale, effects, tmp / "run", MIRROR, config_dir=config_dir)
    stats = rehearse_workflow.run_workflow(root, cores=2)
    assert stats["returncode"] == 0, stats["log"].read_text()[-4000:]
    return root, effects, stats


@pytest.mark.slow
def test_planted_effect_is_recovered_and_the_null_row_is_not_supported(rehearsal):
    root, effects, stats = rehearsal
    out = rehearse_workflow.check_claims(root, effects)
    lines = []
    counts = rehearse.report(out, lines.append)
    recovered, planted, false = counts["recovered"], counts["planted"], counts["false_supported"]
    assert counts["false_contradicted"] == counts["wrong_sign"] == 0, "\n".join(lines)
    truth = {r["claim"]: effect for r, effect in out}
    assert truth["beats greedy"] == truth["beats Maj@N"] == 0.40
    assert truth["always-affirm refinement falls below Maj@N"] == 0.0
    assert (recovered, planted, false) == (3, 3, 0), "\n".join(lines)
    assert all(r["engine"] == "simulated" and int(r["n_questions"]) == 60 for r, _ in out)
    # 2 models, data, 2 generate-cells and 2 score-cells (4 + 1 labels), claims, report, audit, all
    assert stats["jobs"] >= 10 and rehearse_workflow.cached_requests(root) > 60 * 3


@pytest.mark.slow
def test_the_run_is_labelled_simulated_and_audits_clean(rehearsal):
    root, _, _ = rehearsal
    manifest = (root / "results" / "models" / "qwen2.5-1.5b-instruct" / "manifest.json").read_text()
    assert '"simulated": true' in manifest  # no weights were fetched
    assert "simulated" in (root / "results" / "report" / "index.html").read_text().lower()
    audit = (root / "results" / "report" / "audit.txt").read_text()
    assert "audit: OK" in audit, audit[-2000:]
    with open(root / "results" / "report" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert all("/simulated/" in r["score_file"] for r in rows)
    # each model's rows were generated and scored by its own jobs (a rule made in a loop once
    # ran every job with the loop's last model: .ci/snakemake_lint.py)
    by_model = {(r["model"], r["method"]) for r in rows}
    assert ("llama-3.1-8b-instruct", "greedy") in by_model and ("qwen2.5-1.5b-instruct", "refine") in by_model


# ---- DRR: drr_paper's whole DAG on the simulated reasoner and discriminator (drr/simulated_dm.py)
DRR_EFFECTS = "effects:\n  - {label: drr, points: 20, datasets: [commonsenseqa]}\n"


@pytest.mark.slow
def test_new_effects_in_a_finished_run_directory_plan_every_generation_again(rehearsal, tmp_path):
    """`retrace rehearse --effects NEW` in a finished run directory re-derives its config: the
    generation jobs must run again (their keys carry the effects' content), or the old answers
    would be checked against the new truth. Same effects: nothing to do."""
    root, effects, _ = rehearsal
    copy = tmp_path / "run"
    shutil.copytree(root, copy, symlinks=True)  # file times kept: a finished run
    source = root.parent / "config"  # config_with's copy, holding the test's experiment

    def planned(effects_file) -> str:
        rehearse_workflow.derive("rehearse_tiny", 0.12, effects_file, copy, MIRROR, config_dir=source)
        return rehearse_workflow.dry_run(copy)

    assert "Nothing to be done" in planned(effects)
    new = tmp_path / "effects.yaml"
    new.write_text("effects:\n  - {label: majority, points: 30}\n")
    plan = planned(new)
    assert "Nothing to be done" not in plan
    assert re.search(r"^generate_cell_0\s+1$", plan, re.M), plan[-3000:]  # the cell job of all four labels


@pytest.fixture(scope="module")
def drr_rehearsal(tmp_path_factory):
    """drr_paper at scale 0.02 (24 CommonsenseQA, 10 OpenBookQA, 7 PIQA, 5 WinoGrande evaluation
    questions): about 70 jobs, minutes on 2 cores."""
    return finished_rehearsal(tmp_path_factory.mktemp("rehearse_drr"), "drr_paper", 0.02, DRR_EFFECTS)


@pytest.mark.slow
def test_drr_rows_carry_their_planted_truth_and_no_null_row_is_supported(drr_rehearsal):
    root, effects, stats = drr_rehearsal
    out = rehearse_workflow.check_claims(root, effects)
    lines = []
    counts = rehearse.report(out, lines.append)
    planted, false = counts["planted"], counts["false_supported"]
    assert counts["false_contradicted"] == counts["wrong_sign"] == 0, "\n".join(lines)
    assert false == 0, "\n".join(lines)
    truth = {(r["claim"], r["dataset"]): t for r, t in out}
    assert truth[("DRR beats CoT on accuracy", "commonsenseqa")] == 0.20
    assert truth[("DRR beats CoT on FS(3)", "commonsenseqa")] == 0.80
    assert (
        truth[("DRR beats CoT on accuracy", "piqa")] == 0.0
        and 0 < truth[("DRR beats CoT on accuracy", "all")] < 0.2
    )
    assert {r["dataset"] for r, _ in out} == {"commonsenseqa", "openbookqa", "piqa", "winogrande", "all"}
    # SFT-LoRA's two rows too (simulated, drr/sft.py): null SFT-LoRA, so DRR's +20 is their truth;
    # each accuracy row has its "abstain = wrong" twin beside it (acc_abstention: both, issue 41)
    twins = {k: t for k, t in truth.items() if k[0].endswith(WRONG_SUFFIX)}
    assert twins and all((k[0].removesuffix(WRONG_SUFFIX), k[1]) in truth for k in twins)
    assert planted == 2 * 16 + sum(1 for t in twins.values() if t), "\n".join(lines)  # +SFT-LoRA FS(1)
    assert truth[("DRR beats SFT-LoRA on accuracy", "commonsenseqa")] == 0.20
    assert all(r["engine"] == "simulated" for r, _ in out) and stats["jobs"] >= 60


@pytest.mark.slow
def test_the_drr_rehearsal_is_labelled_simulated_and_audits_clean(drr_rehearsal):
    import json

    root, _, _ = drr_rehearsal
    run = root / "results" / "drr" / "llama-3.1-8b-instruct" / "simulated"
    assert (
        json.loads((run / "dm" / "seed0" / "weighted" / "checkpoint.json").read_text())["simulated"] is True
    )
    assert "SIMULATED" in (root / "results" / "drr" / "section.json").read_text()
    sft = next(run.glob("eval/commonsenseqa/seed0/episodes/sft_lora.jsonl.prov.json"))
    assert json.loads(sft.read_text())["simulated"] is True
    assert "simulated" in (root / "results" / "report" / "index.html").read_text().lower()
    audit = (root / "results" / "report" / "audit.txt").read_text()
    assert "audit: OK" in audit, audit[-2000:]


# ---- ART: programs written by the simulated engine (art/simulated.py), tools run for real
ART_TINY = """\
runs:
  - models: [smollm2-135m-q41]
    backend: llamacpp
    datasets: [smoke_math_mini]
    methods: [greedy]
    seeds: [0]
art:
  models: [smollm2-135m-q41]
  backend: llamacpp
  tasks: {library: [arithmetic], unseen: [word_unscrambling]}
  methods: [fewshot, art, art_regenerate, art_notools]
  selection: similarity
  n_tasks: 2
  examples: 30
  pool: 2
  settings: {max_steps: 3, segment_tokens: 24, program_tokens: 64, answer_tokens: 8, demos_per_task: 1,
             fewshot_k: 2}
  tools: {code_generate: {max_tokens: 48}, code_execute: {wall_s: 10, sandbox: wasm}}
  overrides: [backend.engine.n_ctx=2048]   # dropped by the rehearsal (an engine setting)
"""
ART_EFFECTS = "effects:\n  - {label: art, points: 40}\n  - {label: art_regenerate, points: 40}\n"


@pytest.fixture(scope="module")
def art_rehearsal(tmp_path_factory):
    """About 20 jobs (8 ART runs of 30 programs, each with a sandboxed code execute): ~1.5 min on 2 cores."""
    tmp = tmp_path_factory.mktemp("rehearse_art")
    config = config_with(tmp, "rehearse_art_tiny", ART_TINY)
    return finished_rehearsal(tmp, "rehearse_art_tiny", 1.0, ART_EFFECTS, config)


@pytest.mark.slow
def test_art_effect_is_recovered_and_the_null_row_is_not_supported(art_rehearsal):
    root, effects, stats = art_rehearsal
    out = rehearse_workflow.check_claims(root, effects)
    lines = []
    counts = rehearse.report(out, lines.append)
    recovered, planted, false = counts["recovered"], counts["planted"], counts["false_supported"]
    assert counts["false_contradicted"] == counts["wrong_sign"] == 0, "\n".join(lines)
    truth = {r["claim"]: t for r, t in out}
    assert truth == {
        "ART beats few-shot on unseen tasks": 0.40,
        "ART beats few-shot on library tasks": 0.40,  # the claims map's row (the tiny run's tasks)
        "tools help": 0.40,
        "pausing at tool calls beats regenerating the suffix": 0.0,
    }
    # the library row's one tiny task has too few questions to detect +40 here: planted, missed
    assert (recovered, planted, false) == (2, 3, 0), "\n".join(lines)
    assert all(r["engine"] == "simulated" for r, _ in out)
    assert {int(r["n_questions"]) for r, _ in out} == {30, 60}


@pytest.mark.slow
def test_art_programs_ran_their_tools_and_the_run_audits_clean(art_rehearsal):
    import json

    root, _, _ = art_rehearsal
    run = root / "results" / "art" / "smollm2-135m-q41" / "word_unscrambling"
    rows = [json.loads(x) for x in (run / "art" / "seed0.jsonl").read_text().splitlines()]
    calls = [c for r in rows for c in r["trace"]["tool_calls"]]
    assert len(rows) == 30 and all(r["trace"]["complete"] for r in rows)
    # the code tool's request reached the engine, and the sandbox ran the code it wrote
    assert [c["tool"] for c in calls] == ["code_generate", "code_execute"] * 30
    assert all(c["ok"] and c["output"] == "4" for c in calls if c["tool"] == "code_execute")
    assert "SIMULATED" in (root / "results" / "art" / "summary" / "section.json").read_text()
    assert "simulated" in (root / "results" / "report" / "index.html").read_text().lower()
    audit = (root / "results" / "report" / "audit.txt").read_text()
    assert "audit: OK" in audit, audit[-2000:]
