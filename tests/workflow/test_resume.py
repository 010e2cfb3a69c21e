"""kill -9 during generation, then rerun: finished requests come from the cache, results match.

Both runs build the generation files only (GENERATIONS): scoring, claims and the report read
what generation wrote and are covered on the shared `pipeline` run.

An ART program is killed the same way while its code runs (test_an_art_program_killed_alone_...):
only the one process that called `run_code` gets the SIGKILL, as a `kill -9` of a job would,
not its process group; the sandbox's worker must die with it, and the rerun must ask the model
nothing it had already asked (tool output is the same on every run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retrace.store.cache import RequestCache
from tests.workflow.conftest import SNAKEMAKE, TIMEOUT_SCALE, copy_repo, env_for, snakemake, write_config
from tests.workflow.experiments import ONE_THREAD

pytestmark = pytest.mark.slow

# Small cache batches so the kill lands between commits. The deterministic engine mode (one
# slot, no KV reuse) keeps llama.cpp's arithmetic independent of what ran before, so resumed
# samples are bitwise equal to an uninterrupted run (see retrace.backends.llamacpp).
OVERRIDES = [
    ONE_THREAD,
    "dataset.limit=2",
    "backend.engine.batch_size=2",
    "backend.engine.deterministic=true",
]
GENERATIONS = [
    f"results/generations/smollm2-135m-q40/llamacpp/{d}/{m}/seed0.jsonl"
    for d in ("smoke_math", "smoke_mc")
    for m in ("greedy", "majority")
]


def _cached(db) -> int:
    return RequestCache(db).count() if db.exists() else 0


def _kill_when_cached(root, at_least: int) -> int:
    proc = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", *GENERATIONS],
        cwd=root,
        env=env_for(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    db = root / "results/cache/requests"
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
    snakemake(reference, *GENERATIONS)

    root = copy_repo(tmp_path / "killed")
    write_config(root, overrides=OVERRIDES)
    assert _kill_when_cached(root, at_least=3) >= 3
    killed_at, db = time.time(), root / "results/cache/requests"
    finished = RequestCache(db).keys()
    done_jobs = {str(p) for p in (root / "results/generations").rglob("*.jsonl")}
    in_done_jobs = {s["key"] for p in done_jobs for line in open(p) for s in json.loads(line)["samples"]}
    interrupted = finished - in_done_jobs  # committed by jobs the kill cut short
    assert interrupted, "the kill did not land inside a generation job"

    snakemake(root, "--unlock")
    snakemake(root, *GENERATIONS)

    # Every request the interrupted jobs had finished was served from the cache on rerun.
    assert interrupted <= {h["key"] for h in RequestCache(db).hits(since=killed_at)}
    provs = [json.loads(p.read_text()) for p in (root / "results/generations").rglob("*.jsonl.prov.json")]
    assert sum(p["usage"]["cache_hits"] for p in provs) >= len(interrupted)
    assert set(_texts(root)) == set(GENERATIONS)  # nothing missing, so nothing compared vacuously
    assert _texts(root) == _texts(reference)
    proc = subprocess.run(
        [SNAKEMAKE, "--cores", "2", "-n", *GENERATIONS],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
    )
    assert "Nothing to be done" in proc.stdout + proc.stderr


ART_PROGRAM = Path(__file__).with_name("art_code_program.py")
# The sandbox's wall budget for the reruns: it ends the sleeping step, and the listing step must
# finish inside it whatever the load (3 s was once too short for a WASM start beside CI's other
# processes: "Error: wall_time" for the listing); a guard, so scaled like every other timeout.
WALL_S = 5 * TIMEOUT_SCALE


def _workers_of(pid: int) -> list[int]:
    """Live WASM workers whose parent is `pid`."""
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            fields = dict(
                line.split(":", 1) for line in (p / "status").read_text().splitlines() if ":" in line
            )
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields["PPid"]) == pid and fields["State"].split()[0] != "Z" and b"wasm_exec.py" in cmd:
            found.append(int(p.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _art_program(cache, wall_s: float, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, str(ART_PROGRAM), str(cache), str(wall_s)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_an_art_program_killed_alone_leaves_no_worker_and_resumes_from_its_cache(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}  # its job folders, apart
    cache = tmp_path / "killed"
    db = cache / "requests.sqlite"
    proc = subprocess.Popen(
        [sys.executable, str(ART_PROGRAM), str(cache), "600"], env=env, stdout=subprocess.DEVNULL
    )
    # six requests (the last asks to run the sleeping code), then its worker: kill the caller alone
    deadline = time.time() + 600
    while not (_cached(db) >= 6 and (workers := _workers_of(proc.pid))):
        assert proc.poll() is None and time.time() < deadline, "the program ended before it could be killed"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 60
    while any(_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers), f"the WASM worker outlived its killed caller: {workers}"

    taken, killed_at = RequestCache(db).keys(), time.time()
    rerun = _art_program(cache, WALL_S, env)
    # every step the killed run had taken came from the cache; only the one after the kill is new
    assert taken <= {h["key"] for h in RequestCache(db).hits(since=killed_at)}
    assert rerun["sent"] == 1 and rerun["answer"] == "done", rerun
    # another process, another cache: the same tool output, byte for byte
    assert _art_program(tmp_path / "fresh", WALL_S, env)["tools"] == rerun["tools"]
    left = list((tmp_path / "tmp").glob("retrace-wasm-*"))  # the killed caller's folder: swept
    deadline = time.time() + 120
    while any(p.exists() for p in left) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(p.exists() for p in left), left
