"""Verdict hygiene (issue 46): what ran labels every claim row, simulated parts are refused
beside a real engine, seeds count by design, subsets and non-finite scores are never silent."""

from __future__ import annotations

import csv
import json

import pytest

from retrace.config.compose import ConfigError
from retrace.stages import claims
from retrace.store.provenance import prov_path
from retrace.util.hashing import sha256_file


def write_score(tmp_path, label, correct, model="m", seed=0, **facts):
    """A score record as stages/score.py writes it, `facts` (engine, deterministic, subset) as
    its claims_facts would record them."""
    path = tmp_path / f"{model}-{label}-{seed}.json"
    record = {
        "job": {"model": model, "backend": "vllm", "dataset": "d", "method": label, "seed": seed},
        "flops": {"effective": 1e15, "nominal": 1e15},
        "per_problem": [{"id": f"q{i}", "vote_correct": c} for i, c in enumerate(correct)],
        **facts,
    }
    path.write_text(json.dumps(record))
    prov_path(path).write_text(json.dumps({"artifact": {"sha256": sha256_file(path)}}))
    return path


def rows_of(path) -> dict:
    return {(r["claim"], r["model"]): r for r in csv.DictReader(open(path))}


def test_spine_and_weaker_rows_take_their_engine_from_the_score_records(tmp_path):
    """Spine rows (refine vs greedy and the rest) and the weaker-model rows: a row is
    "simulated" when either side's records say the simulated engine ran, whatever the
    backend name of the job."""
    files = [
        write_score(tmp_path, "refine", [1] * 15 + [0] * 5, "weak", engine="simulated"),
        write_score(tmp_path, "majority", [1] * 5 + [0] * 15, "weak", engine="vllm"),
        write_score(tmp_path, "greedy", [1] * 5 + [0] * 15, "weak", engine="vllm"),
        write_score(tmp_path, "refine", [1] * 19 + [0], "strong", engine="vllm"),
        write_score(tmp_path, "majority", [1] * 18 + [0] * 2, "strong", engine="vllm"),
    ]
    out = tmp_path / "claims.csv"
    claims.run(files, out, weaker=[("weak", "strong")])
    rows = rows_of(out)
    assert rows[("beats greedy", "weak")]["engine"] == "simulated"
    assert rows[("beats Maj@N", "weak")]["engine"] == "simulated"
    assert rows[("weaker models gain most", "weak vs strong")]["engine"] == "simulated"
    assert rows[("beats Maj@N", "strong")]["engine"] == "vllm"  # nothing simulated there


def test_drr_rows_label_a_simulated_sft_lora_or_dm_whatever_the_backend(tmp_path):
    """DRR rows: the parts that made each method's episodes (drr/episodes.ran_parts,
    drr/sft.py) decide the row's engine; a simulated SFT-LoRA beside a real reasoner is
    "simulated", and the note names the part."""
    from retrace.drr.report import label_engine, ran_by_method

    def episodes(method, ran):
        path = tmp_path / "m" / "vllm" / "eval" / "d" / "seed0" / "episodes" / f"{method}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        prov_path(path).write_text(json.dumps({"ran": ran}))
        return path

    files = [
        episodes("drr", {"reasoner": "vllm", "dm": "trained"}),
        episodes("cot", {"reasoner": "vllm"}),
        episodes("sft_lora", {"sft_lora": "simulated"}),
        episodes("drr_shuffled", {"reasoner": "vllm", "dm": "simulated"}),
    ]
    parts = ran_by_method(files)
    for baseline, engine, note in (
        ("cot", "vllm", ""),
        ("sft_lora", "simulated", "simulated: sft_lora"),
        ("drr_shuffled", "simulated", "simulated: dm"),
    ):
        for dataset in ("d", "all"):  # per dataset and Table 1's Overall
            row = {"model": "m", "dataset": dataset, "method": "drr", "baseline": baseline, "note": ""}
            label_engine(row, parts)
            assert (row["engine"], row["note"]) == (engine, note), (baseline, dataset)


def test_art_rows_take_their_engine_from_the_run_records():
    from retrace.art.summary import ran_engine

    scores = [
        {"model": "m", "label": "art", "engine": "simulated"},
        {"model": "m", "label": "fewshot", "engine": "simulated"},
        {"model": "m", "label": "autocot", "engine": "vllm"},
        {"model": "n", "label": "art", "engine": "vllm"},
    ]
    row = {"model": "m", "method": "art", "baseline": "autocot"}
    assert ran_engine(row, scores) == "simulated"
    assert ran_engine({"model": "n", "method": "art", "baseline": "autocot"}, scores) == "vllm"


def test_a_simulated_part_beside_a_real_backend_is_refused_in_one_line():
    """A drr_paper copy with the simulated SFT-LoRA and a real reasoner: the experiment check
    (every command's load_experiment) names the file and the key; settings.load names the key."""
    from retrace.config.compose import CONFIG_DIR
    from retrace.config.experiment import check
    from retrace.drr import settings
    from retrace.util.yamlfile import load_yaml

    raw = load_yaml(CONFIG_DIR / "experiment" / "drr_paper.yaml")
    raw["drr"]["sft_lora"]["hf_model"] = "simulated"
    with pytest.raises(ConfigError) as e:
        check(raw, "config/experiment/drr_sim.yaml")
    line = str(e.value)
    assert "\n" not in line and line.startswith("config/experiment/drr_sim.yaml: drr.sft_lora.hf_model:")
    assert "rehearsal only" in line
    with pytest.raises(ValueError, match=r"^drr\.sft_lora\.hf_model: .*backend is 'vllm'"):
        settings.load(raw["drr"])
    # the rehearsal's copy (every backend simulated) passes, and so does the shipped file
    rehearsal = {**raw, "drr": {**raw["drr"], "backend": "simulated"}}
    rehearsal["runs"] = [{**r, "backend": "simulated"} for r in raw["runs"]]
    check(rehearsal, "rehearsal")
    check(load_yaml(CONFIG_DIR / "experiment" / "drr_paper.yaml"), "drr_paper")
    # a simulated engine beside a real one is refused too (runs[0] real, the rest simulated)
    mixed = {k: v for k, v in rehearsal.items() if k != "drr"}
    mixed["runs"] = [raw["runs"][0], {**raw["runs"][0], "backend": "simulated"}]
    with pytest.raises(ConfigError, match=r"runs\[1\]\.backend: 'simulated' is for a rehearsal only"):
        check(mixed, "mixed")


def test_seeds_count_by_design_not_by_whether_they_agree(tmp_path):
    """A temperature-0 label counts its seed 0 once even when its seeds differ (an engine that
    is not deterministic); a sampled label counts every seed when they differ anywhere beyond
    copies (test_claims_seeds.py: seeds identical on >= 98 % of questions are one draw)."""
    greedy = [
        write_score(tmp_path, "greedy", [1] * 10 + [0] * 10, seed=0, deterministic=True),
        write_score(tmp_path, "greedy", [1] * 11 + [0] * 9, seed=1, deterministic=True),
        write_score(tmp_path, "greedy", [1] * 10 + [0] * 10, seed=2, deterministic=True),
    ]
    refine = [
        write_score(tmp_path, "refine", [int(s == 1)] + [0] * 19, seed=s, deterministic=False)
        for s in range(3)
    ]
    out = tmp_path / "claims.csv"
    claims.run(greedy + refine, out)
    row = rows_of(out)[("beats greedy", "m")]
    assert row["test"] == "max(sign_flip_exact, stratified_exact)"  # 3 counted seeds against 1
    assert "baseline: temperature 0, seed 0 of 3 counted" in row["note"] and "differ on 1" in row["note"]
    assert "the engine is not deterministic" in row["note"]  # the records' bitwise_repeatable: false
    assert float(row["acc_baseline"]) == pytest.approx((10 + 11 + 10) / 60)  # reported over all seeds


def test_seeds_that_differ_on_a_deterministic_engine_are_called_out():
    import numpy as np

    from retrace.scoring.claims import compare_matrices

    greedy = np.array([[1.0] * 10 + [0.0] * 10, [1.0] * 11 + [0.0] * 9])
    refine = np.array([[0.0] * 20] * 2)
    row = compare_matrices(refine, greedy, deterministic=(False, True), repeatable=(True, True))
    assert "differ on 1 questions although the engine is deterministic: check it" in row["note"]
    same = compare_matrices(refine, greedy[[0, 0]], deterministic=(False, True), repeatable=(True, True))
    assert "identical)" in same["note"] and "check it" not in same["note"]


def test_a_subset_is_recorded_on_every_row_and_marks_its_verdict(tmp_path):
    files = [
        write_score(tmp_path, "refine", [1] * 18 + [0] * 2, subset="limit=20"),
        write_score(tmp_path, "greedy", [1] * 6 + [0] * 14, subset="limit=20"),
    ]
    family = tmp_path / "family.csv"
    family.write_text("claim,model,dataset,verdict,p_value,evidence,note\nc,m,d,inconclusive,0.5,,\n")
    out = tmp_path / "claims.csv"
    claims.run(files, out, extra=[family], subset=claims.override_subset(["dataset.limit=20"]))
    rows = list(csv.DictReader(open(out)))
    assert {r["subset"] for r in rows} == {"limit=20"}
    assert all("verdict on a subset (limit=20)" in r["note"] for r in rows)
    record = json.loads(prov_path(out).read_text())
    assert record["config"]["subset"] == "limit=20"
    assert claims.override_subset([]) == "full" and claims.override_subset(["method.n=8"]) == "full"


def test_a_limit_is_recorded_even_where_the_dataset_has_no_more_questions(tmp_path):
    # `retrace run --experiment refine_smoke --limit 20` on a 20-question set: the score records
    # read "full", the run's override still names the limit (optional stopping is disclosed)
    files = [write_score(tmp_path, "refine", [1] * 18 + [0] * 2), write_score(tmp_path, "greedy", [0] * 20)]
    out = tmp_path / "claims.csv"
    claims.run(files, out, subset="limit=20")
    (row,) = list(csv.DictReader(open(out)))
    assert row["subset"] == "limit=20" and "verdict on a subset (limit=20)" in row["note"]


def test_a_full_run_reads_full(tmp_path):
    files = [write_score(tmp_path, "refine", [1] * 18 + [0] * 2), write_score(tmp_path, "greedy", [0] * 20)]
    out = tmp_path / "claims.csv"
    claims.run(files, out)
    (row,) = list(csv.DictReader(open(out)))
    assert row["subset"] == "full" and "subset" not in row["note"]


def test_a_non_finite_score_is_refused_naming_the_file_and_question(tmp_path):
    refine = write_score(tmp_path, "refine", [1] * 18 + [0] * 2)
    greedy = write_score(tmp_path, "greedy", [0] * 20)
    record = json.loads(greedy.read_text())
    record["per_problem"][3]["vote_correct"] = float("nan")
    greedy.write_text(json.dumps(record))
    with pytest.raises(ValueError) as e:
        claims.run([refine, greedy], tmp_path / "claims.csv")
    assert str(e.value).startswith(f"{greedy}: question 'q3' has a non-finite score")
    from retrace.scoring.claims import compare

    with pytest.raises(ValueError, match="question 'b': non-finite score inf"):
        compare([{"a": 1.0, "b": float("inf")}], [{"a": 0.0, "b": 0.0}])


def test_the_score_record_states_seed_structure_engine_and_subset_from_config_and_records():
    """stages/score.claims_facts: temperature 0 from the method config (not the scores), the
    engine from the generation's record, the subset from the dataset's limit and count."""
    from retrace.stages.score import claims_facts

    cfg = {
        "method": {"name": "majority", "sampling": {"temperature": 0.7}},
        "backend": {"name": "vllm"},
        "dataset": {"limit": 20, "questions": 500},
    }
    facts = claims_facts(cfg, {"engine": {"name": "simulated"}})
    assert facts == {"deterministic": False, "engine": "simulated", "subset": "limit=20"}
    greedy = {**cfg, "method": {"name": "greedy"}, "dataset": {"limit": None, "questions": 500}}
    assert claims_facts(greedy, {"engine": {"name": "vllm"}}) == {
        "deterministic": True,
        "engine": "vllm",
        "subset": "full",
    }
    zero = {**cfg, "method": {"name": "beam", "sampling": {"temperature": 0.0}}}
    assert claims_facts(zero, {})["deterministic"] and claims_facts(zero, {})["engine"] == "vllm"


def test_the_report_opens_with_a_subset_banner():
    from retrace.report.html import render_html, subset_banner
    from retrace.scoring.claims import claim_row
    from retrace.scoring.run_facts import mark_subset

    assert subset_banner([{"subset": "full"}, {"subset": ""}]) == ""
    a, b = [{f"q{i}": float(i < 15) for i in range(20)}], [{f"q{i}": 0.0 for i in range(20)}]
    row = mark_subset(claim_row("beats greedy", "m", "d", "refine", "greedy", a, b), "limit=20")
    page = render_html([], [], claims=[row])
    assert 'id="subset-banner"' in page and "SUBSET (limit=20)" in page
