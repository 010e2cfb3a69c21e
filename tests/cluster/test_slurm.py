"""Live SLURM: the cluster smoke (config/experiment/cluster_smoke.yaml) through Snakemake's
SLURM executor (profiles/slurm), against a local run of the same config.

Needs a running single-node SLURM with accounting: `tests/cluster/slurm_up.sh` (as root;
.ci/run starts it and stops it afterwards). Where `sinfo`/`sacct` do not answer the test is
skipped with the reason, unless RETRACE_REQUIRE_SLURM=1 (CI), where that is a failure.

    RETRACE_REQUIRE_SLURM=1 pytest -ra tests/cluster

Jobs cancelled at random and one ended at its time limit, finished by the profile's retries:
tests/cluster/test_slurm_chaos.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retrace.store.cache import RequestCache
from tests.workflow.conftest import SNAKEMAKE, copy_repo, env_for, snakemake, write_config

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
EXPERIMENT = "cluster_smoke"
# Test-only polling: the plugin's defaults (40 s before the first status check, growing by
# 10 s while nothing finishes) suit real clusters, not a 9-job smoke.
# Two threads per shard fill the 2-CPU node, so one shard runs at a time and the cache
# entries that appear while it runs are its own (the test cancels it after its first ones).
TEST_ARGS = [
    "--slurm-init-seconds-before-status-checks",
    "5",
    "--seconds-between-status-checks",
    "3",
    "--set-threads",
    "generate_shard_0=2",  # the one sharded label's shard rule (rule_groups: one per group)
]
# Fields that differ between any two runs by design, local or not, and are left out of the
# comparison: provenance records carry timings, hosts and the executor (SLURM job ids), so
# hashes OF RECORDS differ (results.csv `prov_sha256`, claims.csv `evidence`, the hashes shown
# in index.html); each sample's `latency_s` is wall-clock time and its `cache_hit` says whether
# this run generated it (a resumed run serves some from the cache); a score's
# `generation_usage` and `request_cache_hits` say how the run went (engine seconds, cache
# hits, engine loads); the report's run summary and the probe's raw rate are timings.
# Texts, answers, token counts, accuracies and claims must be equal.
RECORD_HASH_COLUMNS = {"results.csv": "prov_sha256", "claims.csv": "evidence"}
# Outputs of the localrules (profiles/slurm): these jobs run in the controller, not under SLURM.
LOCAL_RULE_OUTPUTS = (
    "results/data/",
    "results/models/",  # materialised on the login node, which has network (workflow/rules/model.smk)
    "results/scores/",
    "results/generations/",  # the sharded label's, merged by its score job (plan.merged_in_score)
    "results/diagnostics/",
    "results/report/",
)
RUN_SPECIFIC = ("latency_s", "cache_hit", "generation_usage", "request_cache_hits")


def run_slurm(root: Path, log: Path, *args: str) -> subprocess.Popen:
    """Snakemake on SLURM in the background, its output in the file `log`: a pipe that nobody
    reads while the test polls the queue would fill and stall Snakemake."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [SNAKEMAKE, "--profile", "profiles/slurm", *TEST_ARGS, *args],
            cwd=root,
            env=env_for(root),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _finish(proc: subprocess.Popen, log: Path, timeout: float) -> str:
    """Wait for `proc` (run_slurm's) and return its output."""
    proc.wait(timeout=timeout)
    return log.read_text(errors="replace")


def _squeue(root: Path) -> list[tuple[str, str, str]]:
    """(job id, comment, state) of the queued and running jobs of the workflow in `root` (the
    jobs' working directory: another workflow's jobs on this SLURM are not the test's)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T|%Z"], capture_output=True, text=True).stdout
    rows = [line.split("|", 3) for line in out.splitlines() if line.strip()]
    return [(i, c, s) for i, c, s, d in rows if Path(d) == root.resolve()]


def _wait_for_empty_queue(root: Path, timeout: float = 900) -> None:
    deadline = time.time() + timeout
    while _squeue(root) and time.time() < deadline:
        time.sleep(1)
    assert not _squeue(root), f"jobs still queued: {_squeue(root)}"


def _scancel_a_generation_mid_run(proc, root: Path, cache_dir: Path, timeout: float = 1200) -> str:
    """Wait for a shard job (of the one sharded label, majority) that has committed requests but
    not finished; scancel it. Its SLURM comment names its rule (generate_shard_<i>, whose paths
    hold model, backend and label) and wildcards (dataset, seed, shard)."""
    deadline, start_count = time.time() + timeout, {}
    while time.time() < deadline and proc.poll() is None:
        running = [(i, c) for i, c, s in _squeue(root) if s == "RUNNING" and "generate_shard_" in c]
        cached = RequestCache(cache_dir).count() if (cache_dir / "index").exists() else 0
        for job_id, _ in running:
            start_count.setdefault(job_id, cached)
            if cached > start_count[job_id]:  # it has committed at least one batch
                subprocess.run(["scancel", job_id], check=True)
                return job_id
        time.sleep(0.1)
    raise AssertionError("no majority shard job could be caught mid-run")


def _records(root: Path) -> dict[str, dict]:
    return {
        str(p.relative_to(root)): json.loads(p.read_text())
        for p in sorted((root / "results").rglob("*.prov.json"))
    }


def _without(obj, keys=RUN_SPECIFIC):
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_without(v, keys) for v in obj]
    return obj


def _artifacts(root: Path) -> dict[str, object]:
    """Data, shard, generation and score artifacts (not records), RUN_SPECIFIC fields left out."""
    out = {}
    for p in sorted((root / "results").rglob("*")):
        rel = str(p.relative_to(root))
        if (
            not p.is_file()
            or p.name.endswith(".prov.json")
            or p.name.startswith(".")  # Snakemake's .snakemake_timestamp in a cell's score folder
            or not rel.startswith(
                ("results/generations/", "results/shards/", "results/scores/", "results/data/")
            )
        ):
            continue
        text = p.read_text()
        out[rel] = _without(
            [json.loads(line) for line in text.splitlines()] if p.suffix == ".jsonl" else json.loads(text)
        )
    return out


def _table(path: Path, drop: str) -> list[dict]:
    reader = csv.DictReader(io.StringIO(path.read_text()))
    assert drop in (reader.fieldnames or []), f"{path} has no {drop} column"
    return [reader.fieldnames] + [{k: v for k, v in r.items() if k != drop} for r in reader]


def _html_without_record_hashes(path: Path) -> str:
    """The page up to record hashes and the run summary (engine-seconds and the probed raw
    rate are timings of this run, by design)."""
    text = re.sub(r'<h2 id="engine">.*?</table>', "<run summary>", path.read_text(), flags=re.S)
    return re.sub(r"\b[0-9a-f]{12,64}\b", "<hash>", text)


def _sacct_states() -> dict[str, str]:
    return {job: row["State"] for job, row in _sacct_jobs().items()}


def test_slurm_run_matches_a_local_run_and_resumes_after_scancel(tmp_path, slurm):
    local = copy_repo(tmp_path / "local")
    write_config(local, experiment=EXPERIMENT)
    started = time.time()
    snakemake(local, timeout=1800)
    local_s = time.time() - started

    root = copy_repo(tmp_path / "slurm")
    write_config(root, experiment=EXPERIMENT)
    cache_dir = root / "results/cache/requests"
    started = time.time()
    # Without retries, so that the cancelled job fails the run and the rerun (a restarted
    # controller) resumes it; retries, and a time limit, are tests/cluster/test_slurm_chaos.py.
    first = run_slurm(root, tmp_path / "first.log", "--retries", "0")
    cancelled = _scancel_a_generation_mid_run(first, root, cache_dir)
    killed_at = time.time()
    out = _finish(first, tmp_path / "first.log", timeout=900)
    assert first.returncode != 0, "the workflow did not notice the cancelled job:\n" + out[-3000:]
    _wait_for_empty_queue(root)
    finished = RequestCache(cache_dir).keys()
    done = [
        p for p in (root / "results").rglob("*.jsonl") if "/shards/" in str(p) or "/generations/" in str(p)
    ]
    in_done = {s["key"] for p in done for line in p.open() for s in json.loads(line)["samples"]}
    interrupted = finished - in_done  # requests the cancelled job had committed
    assert interrupted, "the scancel did not land after a committed batch"

    rerun = run_slurm(root, tmp_path / "rerun.log")
    out = _finish(rerun, tmp_path / "rerun.log", timeout=1500)
    assert rerun.returncode == 0, out[-4000:]
    slurm_s = time.time() - started
    print(f"local run {local_s:.0f} s; SLURM run + scancel + rerun {slurm_s:.0f} s")

    # The cancelled job's committed requests were served from the cache, not generated again.
    hits = {h["key"] for h in RequestCache(cache_dir).hits(since=killed_at)}
    assert interrupted <= hits
    shard_usage = [r["usage"] for p, r in _records(root).items() if "/shards/" in p]
    assert sum(u["cache_hits"] for u in shard_usage) >= len(interrupted)

    # Every engine job ran as a SLURM job: each record names a job id that sacct knows as
    # COMPLETED (the cancelled one shows CANCELLED and produced no record); the small stages
    # are localrules (profiles/slurm) and ran in the controller, outside SLURM.
    states = _sacct_states()
    assert states.get(cancelled, "").startswith("CANCELLED")
    records = _records(root)
    assert len(records) >= 8
    for path, rec in records.items():
        ex = rec["host"]["executor"]
        if path.startswith(LOCAL_RULE_OUTPUTS):
            assert ex["kind"] == "local", path
            continue
        assert ex["kind"] == "slurm" and ex["node"] == "localhost", path
        assert states.get(ex["SLURM_JOB_ID"]) == "COMPLETED", (path, ex)
    slurm_ids = {r["host"]["executor"].get("SLURM_JOB_ID") for r in records.values()}
    assert cancelled not in slurm_ids and len(slurm_ids - {None}) >= 2  # 2 shards (and the rerun's)
    merged = [r for p, r in records.items() if p.startswith("results/generations/")]
    assert merged and all(len(r["shards"]) == 2 for r in merged)

    # Same artifacts as the local run (llama.cpp with one slot and no KV reuse is repeatable),
    # and the same report and claims, up to the fields named in RUN_SPECIFIC/RECORD_HASH_COLUMNS.
    mine, theirs = _artifacts(root), _artifacts(local)
    assert sorted(mine) == sorted(theirs) and len(mine) >= 5
    for name in mine:
        assert mine[name] == theirs[name], name
    data = [p for p in mine if p.startswith("results/data/")]
    assert all((root / p).read_bytes() == (local / p).read_bytes() for p in data)
    for name, column in RECORD_HASH_COLUMNS.items():
        assert _table(root / "results/report" / name, column) == _table(
            local / "results/report" / name, column
        )
    assert _html_without_record_hashes(root / "results/report/index.html") == _html_without_record_hashes(
        local / "results/report/index.html"
    )
    audit = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrace",
            "audit",
            "--quiet",
            "results/report/results.csv",
            "results/report/claims.csv",
        ],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
    )
    assert "audit: OK" in audit.stdout + audit.stderr, audit.stdout + audit.stderr
    check = subprocess.run(
        [SNAKEMAKE, "--profile", "profiles/slurm", "-n"],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
    )
    assert "Nothing to be done" in check.stdout + check.stderr


def _sacct_jobs() -> dict[str, dict]:
    """{job id: {"State", "Timelimit"}} of this cluster's jobs of the last two hours."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", "now-2hours", "-o", "JobID,State,Timelimit"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    return {r[0]: {"State": r[1], "Timelimit": r[2]} for r in rows}
