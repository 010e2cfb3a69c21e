"""The refinement suite through the real workflow with SmolLM2: every baseline and falsifier,
Maj@N' priced from measured tokens, diagnostics, claims, and an audit of all of it."""

from __future__ import annotations

import csv
import json

import pytest

from tests.workflow.conftest import assert_relocatable, retrace
from tests.workflow.experiments import JUDGE

pytestmark = pytest.mark.slow

GEN = "results/generations/smollm2-135m-q40/llamacpp/smoke_math_mini"


def test_equal_compute_extends_the_stored_sample_set(refined):
    from retrace.scoring.compute import equal_compute_n, min_sample_tokens, structural_usage

    prov = json.loads((refined / f"{GEN}/majority_eq/seed0.jsonl.prov.json").read_text())
    eq = prov["equal_compute"]
    # N' is exactly what the stored rows' request structure prices (not just ">= N"), the
    # same on any engine, and it really extends the sample set
    rows = {
        lab: [json.loads(l) for l in open(refined / f"{GEN}/{lab}/seed0.jsonl")]
        for lab in ("refine", "majority")
    }
    params = json.loads((refined / "results/models/smollm2-135m-q40/manifest.json").read_text())["params"]
    majority = json.loads((refined / f"{GEN}/majority/seed0.jsonl.prov.json").read_text())
    floor = {  # each Maj@N sample counted as at least the minimum sample length, as the run prices it
        "samples": sum(len(r["samples"]) for r in rows["majority"]),
        "min_generated": min_sample_tokens(majority["config"]["method"]),
    }
    want = equal_compute_n(
        structural_usage(rows["refine"]), structural_usage(rows["majority"]), 2, params, **floor
    )
    assert eq["effective_basis"] == "request structure" and eq["n_prime"] == want["n_prime"] > 2
    nominal = json.loads((refined / f"{GEN}/majority_eq_nominal/seed0.jsonl.prov.json").read_text())[
        "equal_compute"
    ]
    assert nominal["kind"] == "nominal" and nominal["n_prime"] > 2
    maj = [json.loads(l) for l in open(refined / f"{GEN}/majority/seed0.jsonl")]
    ext = [json.loads(l) for l in open(refined / f"{GEN}/majority_eq/seed0.jsonl")]
    for a, b in zip(maj, ext, strict=True):
        assert len(b["samples"]) == eq["n_prime"]
        assert [s["key"] for s in b["samples"][:2]] == [s["key"] for s in a["samples"]]
        assert all(s["cache_hit"] for s in b["samples"][:2])


def test_refinement_depth_zero_is_the_majority_sample_set(refined):
    maj = {r["problem_id"]: r for r in map(json.loads, open(refined / f"{GEN}/majority/seed0.jsonl"))}
    for row in map(json.loads, open(refined / f"{GEN}/refine/seed0.jsonl")):
        depth0 = [d["text"] for d in row["extra"]["depths"][0]]
        assert depth0 == [s["text"] for s in maj[row["problem_id"]]["samples"]]


def test_claims_and_diagnostics_are_written_and_audited(refined):
    rows = list(csv.DictReader(open(refined / "results/report/claims.csv")))
    claims = {(r["method"], r["baseline"]) for r in rows}
    assert {
        ("refine", "greedy"),
        ("refine", "majority"),
        ("refine", "majority_eq"),
        ("refine", "majority_eq_nominal"),
        ("refine_affirm", "majority"),
        ("refine", "refine_nocritic"),
        ("refine", "refine_affirm"),
        ("refine", "best_of_n"),
        ("refine", "beam"),
    } <= claims
    assert all(r["verdict"] in ("supported", "contradicted", "inconclusive") for r in rows)
    diag = json.loads(
        (
            refined / "results/diagnostics/smollm2-135m-q40/llamacpp/smoke_math_mini/seed0/refine.json"
        ).read_text()
    )
    assert len(diag["depths"]) == 2
    assert (
        retrace(refined, "audit", "results/report/claims.csv", "results/report/results.csv").returncode == 0
    )


def test_a_judge_on_another_model_scores_the_same_rollouts(refined):
    own = [json.loads(l) for l in open(refined / f"{GEN}/best_of_n/seed0.jsonl")]
    other = [json.loads(l) for l in open(refined / f"{GEN}/best_of_n_qwen/seed0.jsonl")]
    assert [s["key"] for r in own for s in r["samples"]] == [s["key"] for r in other for s in r["samples"]]
    assert {r["extra"]["scorer"]["model_name"] for r in other} == {JUDGE}
    assert {r["extra"]["scorer"]["model_name"] for r in own} == {"smollm2-135m-q40"}
    prov = json.loads((refined / f"{GEN}/best_of_n_qwen/seed0.jsonl.prov.json").read_text())
    assert any(i["path"].endswith(f"models/{JUDGE}/manifest.json") for i in prov["inputs"])
    assert prov["scorer_usage"]["model"] == JUDGE and prov["scorer_usage"]["requests"] > 0
    # the judge's tokens are priced with the judge's parameter count, not the policy's
    scores = {
        lab: json.loads(
            (
                refined / f"results/scores/smollm2-135m-q40/llamacpp/smoke_math_mini/seed0/{lab}.json"
            ).read_text()
        )
        for lab in ("best_of_n", "best_of_n_qwen")
    }
    assert scores["best_of_n_qwen"]["flops"]["nominal"] > scores["best_of_n"]["flops"]["nominal"]


def test_claims_average_three_seeds(refined):
    rows = {
        (r["method"], r["baseline"]): r for r in csv.DictReader(open(refined / "results/report/claims.csv"))
    }
    row = rows[("refine", "majority")]
    assert (row["n_seeds_method"], row["n_seeds_baseline"]) == ("3", "3")
    accs = []
    for seed in (0, 1, 2):
        s = json.loads(
            (
                refined / f"results/scores/smollm2-135m-q40/llamacpp/smoke_math_mini/seed{seed}/refine.json"
            ).read_text()
        )
        accs.append(s["accuracy"]["value"])
    assert float(row["acc_method"]) == pytest.approx(sum(accs) / 3)
    # different seeds draw different rollouts (distinct request-cache keys)
    keys = [
        [
            s["key"]
            for r in map(json.loads, open(refined / f"{GEN}/majority/seed{k}.jsonl"))
            for s in r["samples"]
        ]
        for k in (0, 1, 2)
    ]
    assert len({tuple(k) for k in keys}) == 3


def test_a_copied_refinement_run_is_finished_and_audits_its_own_files(refined, tmp_path):
    assert_relocatable(
        refined, tmp_path / "moved", ["results/report/results.csv", "results/report/claims.csv"], "tar"
    )
