"""End to end with a real model: outputs, no-op reruns, stale-only reruns, audit, report."""

from __future__ import annotations

import csv
import json
import os

import pytest

from tests.workflow.conftest import edited, planned_outputs, retrace, snakemake

pytestmark = pytest.mark.slow

GEN = "generations/smollm2-135m-q40/llamacpp"
SCORE = "scores/smollm2-135m-q40/llamacpp"
REPORT = {
    "report/index.html",
    "report/results.csv",
    "report/audit.txt",
    "report/claims.csv",
    "report/accuracy_vs_compute.png",
}


def test_run_writes_report_with_traceable_numbers(pipeline):
    rows = list(csv.DictReader(open(pipeline / "results/report/results.csv")))
    assert {(r["dataset"], r["method"]) for r in rows} == {
        ("smoke_math", "greedy"),
        ("smoke_math", "majority"),
        ("smoke_mc", "greedy"),
        ("smoke_mc", "majority"),
    }
    assert all(r["n"] == "4" and 0 <= float(r["accuracy"]) <= 1 for r in rows)
    html = (pipeline / "results/report/index.html").read_text()
    assert all(r["prov_sha256"][:12] in html for r in rows)
    audit = (pipeline / "results/report/audit.txt").read_text()
    assert audit.rstrip().endswith("audit: OK") and "[BAD]" not in audit


def test_generation_records_tokens_for_every_sample(pipeline):
    rows = [json.loads(l) for l in open(pipeline / f"results/{GEN}/smoke_math/majority/seed0.jsonl")]
    assert len(rows) == 4 and all(len(r["samples"]) == 4 for r in rows)
    for s in (s for r in rows for s in r["samples"]):
        assert s["prompt_tokens"] > 0 and s["generated_tokens"] > 0
    prov = json.load(open(pipeline / f"results/{GEN}/smoke_math/majority/seed0.jsonl.prov.json"))
    assert prov["usage"]["requests"] == 16 and prov["flops"]["nominal"] > prov["flops"]["effective"] - 1
    # the requantized test model's pinned digest (config/model/smollm2-135m-q40.yaml)
    assert prov["model"]["fingerprint"] == "6e4b91cd3586645ff373f2c7c054a3902574618f664e09fc9002483612afcde5"


def test_request_cache_packs_requests_into_a_few_files(pipeline):
    """One file per request made millions of files at paper scale; the packed cache keeps a few
    files per job (segments, 16 index shards, hit logs), whatever the number of requests."""
    from retrace.store.cache import RequestCache

    cache = pipeline / "results/cache/requests"
    files = [p for p in cache.rglob("*") if p.is_file()]
    requests = len(RequestCache(cache).keys())
    assert requests >= 20, requests  # greedy and Maj@4 on 2 x 4 questions, plus the probe
    assert len(files) <= 100 and len(files) < requests, (len(files), requests)
    assert not (cache / "objects").exists()  # the old layout is read, never written


def test_second_run_is_a_no_op(pipeline):
    proc = snakemake(pipeline)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def _edit_and_plan(root, rel, edit):
    with edited(root / rel, edit):
        return planned_outputs(root)


def test_sampling_change_reruns_only_that_method(pipeline):
    planned = _edit_and_plan(
        pipeline, "config/method/majority.yaml", lambda s: s.replace("top_p: 0.95", "top_p: 0.9")
    )
    # Generation and scoring are one job per dataset and seed (retrace.stages.generate_cell,
    # score_cell): the greedy files beside a rerun majority are rewritten too, greedy's
    # generations from the request cache (test_generate_cell: no greedy request reaches the engine).
    assert (
        planned
        == {
            *(
                f"{GEN}/{d}/{m}/seed0.jsonl"
                for d in ("smoke_math", "smoke_mc")
                for m in ("greedy", "majority")
            ),
            *(
                f"{SCORE}/{d}/seed0/{m}.json"
                for d in ("smoke_math", "smoke_mc")
                for m in ("greedy", "majority")
            ),
        }
        | REPORT
    )


def test_template_change_reruns_only_its_dataset(pipeline):
    planned = _edit_and_plan(pipeline, "src/retrace/prompts/mc_cot.j2", lambda s: s + "\nBe brief.\n")
    assert (
        planned
        == {
            f"{GEN}/smoke_mc/greedy/seed0.jsonl",
            f"{GEN}/smoke_mc/majority/seed0.jsonl",
            f"{SCORE}/smoke_mc/seed0/greedy.json",
            f"{SCORE}/smoke_mc/seed0/majority.json",
        }
        | REPORT
    )


def test_scoring_code_change_reruns_scoring_not_generation(pipeline):
    planned = _edit_and_plan(pipeline, "src/retrace/scoring/metrics.py", lambda s: s + "\n# changed\n")
    assert (
        planned
        == {f"{SCORE}/{d}/seed0/{m}.json" for d in ("smoke_math", "smoke_mc") for m in ("greedy", "majority")}
        | REPORT
    )


def test_engine_setting_change_reruns_only_the_probe(pipeline):
    """Engine settings do not change what is generated: no generation or score reruns; the
    raw-rate probe (measured with those settings) and the report pages that show it do;
    the claims do not."""
    planned = _edit_and_plan(
        pipeline, "config/backend/llamacpp.yaml", lambda s: s.replace("n_batch: 512", "n_batch: 256")
    )
    assert planned == {"probe/smollm2-135m-q40/llamacpp.json"} | (REPORT - {"report/claims.csv"})


def test_audit_passes_then_fails_after_a_flipped_byte(pipeline):
    assert retrace(pipeline, "audit", "results/report/results.csv").returncode == 0
    target = pipeline / "results/data/smoke_math.jsonl"
    original, st = target.read_bytes(), target.stat()
    target.write_bytes(original[:10] + bytes([original[10] ^ 1]) + original[11:])
    try:
        proc = retrace(pipeline, "audit", "results/report/results.csv")
        assert proc.returncode == 1 and "smoke_math.jsonl" in proc.stdout
    finally:
        target.write_bytes(original)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # the shared run stays finished
    assert retrace(pipeline, "audit", "results/report/results.csv").returncode == 0


def test_snakemake_report_renders(pipeline):
    snakemake(pipeline, "--report", "report.html")
    assert (pipeline / "report.html").stat().st_size > 10_000
