"""Live SLURM chaos: a small rehearsal (simulated engine) through profiles/slurm while jobs are
`scancel`led at random and one runs into its time limit. It must finish within the profile's
`retries` in one Snakemake run, lose nothing (every output of an undisturbed local run of the
same rehearsal present and equal, up to run-specific fields), audit OK, and no job may have
waited on a dead holder's cache lock (the longest lock wait in the job logs <= 5 s, against
the 60 s stall of a lock left behind).

    RETRACE_REQUIRE_SLURM=1 pytest -ra tests/cluster/test_slurm_chaos.py

The rehearsal has four cells (one model, backend and dataset, seeds 0-3), so four generation
jobs (rules generate_cell_*: one job runs every label of a cell, workflow/rules/generate.smk).
The chaos is seeded per cell job (its seed, from SLURM's comment: rule and wildcards): whether
its first attempt is cancelled, with SIGTERM (`scancel`: the job's cleanup runs) or SIGKILL
(`scancel --signal=KILL`: nothing runs), and how long after its engine loaded. Retries are left
alone, so no job needs more than 2 of the profile's 4 attempts. In the held cell (seed 0) the
Maj@N label's first attempt commits one batch, then is held (the simulated engine's
`hold_file`) and its cell job given a 1-minute time limit, which SLURM enforces 60-90 s in (its
periodic check): it hits it whatever the load. Once SLURM has ended it the hold is lifted, and
its retry resumes from the cache. Nothing here asserts a duration but the lock-wait bound.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from retrace.app import rehearse_workflow
from retrace.config.compose import CONFIG_DIR
from retrace.store.cache import RequestCache
from tests import prerequisites
from tests.cluster.test_slurm import (
    RECORD_HASH_COLUMNS,
    TEST_ARGS,
    _artifacts,
    _html_without_record_hashes,
    _sacct_jobs,
    _squeue,
    _table,
    _wait_for_empty_queue,
)
from tests.workflow.conftest import SNAKEMAKE, TIMEOUT_SCALE

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
SEED = 1  # each cell job but the held one is cancelled once, with both signals (asserted)
CANCEL_P = 0.8
MAX_LOCK_WAIT_S = 5.0
MAX_RUNTIME = 30  # minutes: below each job's estimate (30-45 min), so every job asks for it
# Eight MATH-500 questions, four seeds: four cells; one cache commit per 2 requests, 0.4 s each
# (cell jobs of some seconds, caught mid-run); in the held cell Maj@4 is held after its first
# commit while the file `hold` is in the run folder.
CHAOS = """\
runs:
  - models: [qwen2.5-1.5b-instruct]
    backend: vllm
    datasets: [math500]
    seeds: [0, 1, 2, 3]
    methods:
      - greedy
      - {label: majority, overrides: [method.n=4]}
      - {label: refine, overrides: [method.n=2, method.depth=1]}
      - {label: refine_affirm, method: refine, overrides: [method.n=2, method.depth=1, method.critic=affirm]}
"""
ENGINE = ["backend.engine.batch_size=2", "backend.engine.delay_s=0.4"]
SLOW_LABEL, SLOW, HELD_SEED = "majority", "backend.engine.hold_file=hold", 0
LABELS, SEEDS = 4, 4  # labels a cell, cells (seeds)
LOGS = Path("results/logs/generate/qwen2.5-1.5b-instruct/simulated/math500")  # seed<s>.log: a cell job's


def _derive(tmp: Path, name: str) -> Path:
    """The chaos rehearsal's run directory `tmp/name` (retrace.app.rehearse_workflow), its engine
    slowed, the held cell's seed in a run of its own whose Maj@N label is held (`hold_file`)."""
    config = tmp / "config"
    if not config.exists():
        shutil.copytree(CONFIG_DIR, config)
        (config / "experiment" / "chaos.yaml").write_text(CHAOS)
        (tmp / "effects.yaml").write_text("effects:\n  - {label: refine, points: 40}\n")
    mirror = str(prerequisites.mirror())
    root = rehearse_workflow.derive("chaos", 8 / 500, tmp / "effects.yaml", tmp / name, mirror, config)
    import yaml

    path = root / "config" / "experiment" / "chaos.yaml"
    exp = yaml.safe_load(path.read_text())
    [run] = exp["runs"]
    run["overrides"] = [*run.get("overrides", []), *ENGINE]
    held = copy.deepcopy(run)
    held["seeds"], run["seeds"] = [HELD_SEED], [s for s in run["seeds"] if s != HELD_SEED]
    for m in held["methods"]:
        if isinstance(m, dict) and m["label"] == SLOW_LABEL:
            m["overrides"] = [*m.get("overrides", []), SLOW]
    exp["runs"] = [held, run]
    path.write_text(yaml.safe_dump(exp, sort_keys=False))
    return root


def _env(root: Path) -> dict:
    src = str(Path(rehearse_workflow.__file__).resolve().parents[1])
    return {**os.environ, "RETRACE_CONFIG_DIR": str(root / "config"), "PYTHONPATH": src}


def _seed(comment: str) -> int:
    """The seed of a cell job from its SLURM comment (rule_generate_cell_<i>_wildcards_<model>_
    <backend>_<dataset>_<seed>: the executor plugin's, the wildcards in the rule's order)."""
    return int(comment.rsplit("_", 1)[1])


def _engine_loaded(log: Path) -> bool:
    """Whether a cell job's log shows its first engine loading (retrace.engine.llm's line)."""
    return log.exists() and "loading engine" in log.read_text(errors="replace")


def _chaos(proc: subprocess.Popen, root: Path) -> tuple[dict[str, str], list[str]]:
    """Disturb each cell job's first attempt as its cell's seed says until the workflow ends:
    ({job id: "TERM" or "KILL"} scancelled, [job ids given a 1-minute time limit]). A cancel
    lands its seeded delay after the job's first engine loaded (its log says so), amid the
    cell's requests rather than in Python's start-up. The `hold` file goes once the held job's
    first attempt has ended."""
    seen, pending, due, cancelled, limited = set(), {}, [], {}, []
    hold, deadline = root / "hold", time.time() + 900 * TIMEOUT_SCALE  # a guard against hangs
    while proc.poll() is None:
        now, queue = time.time(), _squeue(root)
        if now > deadline:
            os.killpg(proc.pid, signal.SIGTERM)
            raise AssertionError(f"the workflow still ran after {900 * TIMEOUT_SCALE:.0f} s")
        if limited and hold.exists() and (limited[0], "RUNNING") not in {(j, s) for j, _, s in queue}:
            hold.unlink()
        for job_id, comment, state in queue:
            if state != "RUNNING" or "generate_cell_" not in comment or comment in seen:
                continue
            seen.add(comment)  # a retry has the same comment: it is left alone
            seed = _seed(comment)
            rng = random.Random(f"{SEED}:{seed}")
            if seed == HELD_SEED:
                subprocess.run(["scontrol", "update", f"JobId={job_id}", "TimeLimit=1"], check=True)
                limited.append(job_id)
            elif rng.random() < CANCEL_P:
                pending[job_id] = (seed, rng.uniform(0.5, 5.0), rng.choice(["TERM", "KILL"]))
        for job_id, (seed, delay, sig) in list(pending.items()):
            if _engine_loaded(root / LOGS / f"seed{seed}.log"):
                due.append((now + delay, job_id, sig))
                del pending[job_id]
        for item in [d for d in due if d[0] <= now]:
            due.remove(item)
            _, job_id, sig = item
            subprocess.run(["scancel", *(["--signal=KILL"] if sig == "KILL" else []), job_id])
            cancelled[job_id] = sig
        time.sleep(0.2)
    return cancelled, limited


def _page(path: Path) -> str:
    """The report page up to record hashes, the claims' evidence links (short hashes) too."""
    return re.sub(r">[0-9a-f]{8}</a>", "><hash></a>", _html_without_record_hashes(path))


def _lock_waits(root: Path) -> list[float]:
    """The longest cache-lock wait each cell job logged (retrace.cli's summary line)."""
    pattern = re.compile(r"request cache locks: \d+ taken, longest wait ([0-9.]+) s")
    logs = sorted((root / "results" / "logs" / "generate").rglob("*.log"))
    return [float(m.group(1)) for p in logs for m in pattern.finditer(p.read_text(errors="replace"))]


def test_random_scancels_and_a_time_limit_finish_within_retries_losing_nothing(tmp_path, slurm):
    local, root = _derive(tmp_path, "local"), _derive(tmp_path, "slurm")
    undisturbed: dict = {}
    beside = threading.Thread(target=lambda: undisturbed.update(rehearse_workflow.run_workflow(local)))
    beside.start()  # the undisturbed run, on this machine beside the SLURM one
    log = root / "snakemake.log"  # a file, not a pipe: nobody reads a pipe while _chaos polls
    with open(log, "w") as out:
        proc = subprocess.Popen(
            # the "partition's" limit below every job's estimate: each asks for it
            [SNAKEMAKE, "--profile", "profiles/slurm", "--config", f"max_runtime={MAX_RUNTIME}", *TEST_ARGS],
            cwd=root,
            env=_env(root),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (root / "hold").touch()
    try:
        cancelled, limited = _chaos(proc, root)
    finally:
        (root / "hold").unlink(missing_ok=True)
    beside.join(timeout=900 * TIMEOUT_SCALE)
    assert proc.returncode == 0, log.read_text()[-4000:]
    assert undisturbed.get("returncode") == 0, undisturbed
    _wait_for_empty_queue(root)

    # The chaos happened: kills of both kinds landed on running jobs, the slow job hit its limit.
    jobs = _sacct_jobs()
    landed = {j: sig for j, sig in cancelled.items() if jobs[j]["State"].startswith("CANCELLED")}
    assert set(landed.values()) == {"TERM", "KILL"}, (cancelled, {j: jobs[j] for j in cancelled})
    assert len(limited) == 1 and jobs[limited[0]]["State"] == "TIMEOUT", jobs.get(limited[0])
    # Each output was written by a later attempt (a retry, COMPLETED), none by a disturbed one.
    records = {
        str(p.relative_to(root)): json.loads(p.read_text())
        for p in (root / "results" / "generations").rglob("*.prov.json")
    }
    ran = {r["host"]["executor"]["SLURM_JOB_ID"] for r in records.values()}
    assert len(records) == LABELS * SEEDS and all(jobs[j]["State"] == "COMPLETED" for j in ran)
    assert len(ran) == SEEDS  # one job per cell made all of the cell's labels
    assert not ran & (set(cancelled) | set(limited))
    # ... each a new SLURM job asking for the capped runtime (max_runtime, minutes)
    assert all(jobs[j]["Timelimit"] == f"00:{MAX_RUNTIME}:00" for j in ran), {j: jobs[j] for j in ran}
    # The held job's retry served what its first attempt committed (one batch) from the cache.
    [held] = [r for p, r in records.items() if f"/{SLOW_LABEL}/seed{HELD_SEED}." in p]
    assert held["usage"]["cache_hits"] >= 2, held["usage"]

    # Nothing lost: the same artifacts, tables and report as the undisturbed run.
    mine, theirs = _artifacts(root), _artifacts(local)
    assert sorted(mine) == sorted(theirs) and len(mine) >= 6
    for name in mine:
        assert mine[name] == theirs[name], name
    for name, column in RECORD_HASH_COLUMNS.items():
        report = Path("results/report") / name
        assert _table(root / report, column) == _table(local / report, column)
    page = Path("results/report/index.html")
    assert _page(root / page) == _page(local / page)
    audit = (root / "results" / "report" / "audit.txt").read_text()
    assert "audit: OK" in audit, audit[-2000:]
    # What the disturbed attempts committed was served to their retries, not generated again.
    cache = RequestCache(root / "cache")
    assert cache.hits()

    # No job waited on a dead holder's lock: every job that took one logged its longest wait (a
    # retry whose requests its killed attempt had all committed reads the cache without a lock,
    # and logs none; a job stuck behind a dead lock would log its wait or never finish).
    waits = _lock_waits(root)
    print(f"chaos: {len(landed)} scancels landed {sorted(landed.values())}, 1 TIMEOUT; lock waits {waits}")
    assert waits and max(waits) <= MAX_LOCK_WAIT_S, waits
