"""kill -9 during generation, then rerun: finished requests come from the cache, results match."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from tests.workflow.conftest import SNAKEMAKE, copy_repo, env_for, snakemake, write_config

pytestmark = pytest.mark.slow

# One slot and small cache batches: the kill lands between commits, and a single slot
# keeps llama.cpp's arithmetic independent of which requests happen to share a batch.
OVERRIDES = ["dataset.limit=2", "backend.engine.n_parallel=1", "backend.engine.batch_size=2"]


def _cached(db) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as con:
            return con.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.OperationalError:  # table not created yet
        return 0


def _kill_when_cached(root, at_least: int) -> int:
    proc = subprocess.Popen([SNAKEMAKE, "--cores", "2"], cwd=root, env=env_for(root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    db = root / "results/cache/requests.sqlite"
    deadline = time.time() + 600
    while _cached(db) < at_least and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "the workflow finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return _cached(db)


def _texts(root) -> dict:
    out = {}
    for path in sorted((root / "results/generations").rglob("*.jsonl")):
        rows = [json.loads(line) for line in path.open()]
        out[str(path.relative_to(root))] = [[s["text"] for s in r["samples"]] for r in rows]
    return out


def test_kill_then_rerun_reuses_finished_requests(tmp_path):
    reference = copy_repo(tmp_path / "reference")
    write_config(reference, overrides=OVERRIDES)
    snakemake(reference)

    root = copy_repo(tmp_path / "killed")
    write_config(root, overrides=OVERRIDES)
    finished = _kill_when_cached(root, at_least=3)
    assert finished >= 3
    snakemake(root, "--unlock")
    snakemake(root)

    provs = [json.loads(p.read_text()) for p in (root / "results/generations").rglob("*.jsonl.prov.json")]
    # Every request reached the engine exactly once over both runs: what the final jobs
    # generated themselves equals what the cache holds, and the interrupted job's finished
    # requests came back as cache hits.
    engine_runs = sum(p["usage"]["requests"] - p["usage"]["cache_hits"] for p in provs)
    assert engine_runs == _cached(root / "results/cache/requests.sqlite")
    assert sum(p["usage"]["cache_hits"] for p in provs) >= 1
    assert _texts(root) == _texts(reference)
    proc = subprocess.run([SNAKEMAKE, "--cores", "2", "-n"], cwd=root, env=env_for(root),
                          capture_output=True, text=True)
    assert "Nothing to be done" in proc.stdout + proc.stderr
