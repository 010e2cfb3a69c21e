"""Figure 1 of benchmarks/reliability.py: kill -9 at random moments, rerun, compare.

A round is one fresh checkout (own results/ and request cache). In it, Snakemake is started
and killed at a random moment (seeded), up to `per_round` times, each kill followed by
`snakemake --unlock` when a lock was left and a rerun; the last rerun goes to the end and its
results are compared with the uninterrupted reference run. Two kinds of kill:

- `snakemake`: kill -9 of the Snakemake process, then of what is left of its session (its
  jobs), as when the node it runs on dies.
- `job`: kill -9 of one running `python -m retrace <stage>` process; Snakemake sees the job
  fail, lets the others finish and stops.

A request generated twice is one whose cache entry already existed when its generation was
published (retrace.store.cache logs these under duplicates/). The batch in flight at a kill was
never published, so generating it again is not counted: what is counted is exactly what the
suite must show to be 0.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reliability_kit import Checkout, differences, kill_session, outcome, run_jobs, wait

from retrace.store.cache import RequestCache


@dataclass
class KillStats:
    kills: int = 0
    kills_identical: int = 0
    regenerated: int = 0
    stages: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


def kill_once(co: Checkout, kind: str, delay: float, rng: random.Random) -> str | None:
    """Start Snakemake, kill at `delay` s (a job: the first running after it); None if the
    run finished first, else the stage the kill landed in."""
    proc = co.popen()
    if wait(proc, delay):
        return None
    if kind == "snakemake":
        stages = sorted({s for _, s in run_jobs(proc.pid)}) or ["planning"]
        kill_session(proc)
        return "+".join(stages)
    jobs = run_jobs(proc.pid)
    while not jobs:  # between jobs: the next one to start is the one killed
        if wait(proc, 0.05):
            return None
        jobs = run_jobs(proc.pid)
    pid, stage = rng.choice(sorted(jobs))
    os.kill(pid, signal.SIGKILL)
    proc.wait()
    return stage


def kill_round(
    co: Checkout, kind: str, n: int, horizon: float, rng: random.Random, reference: dict, stats: KillStats
) -> None:
    started, kills = time.time(), 0
    for _ in range(n):
        if co.locked():
            co.snakemake("--unlock")
        stage = kill_once(co, kind, rng.uniform(1.0, horizon), rng)
        if stage is None:
            break  # the run completed before the kill: the round is over
        kills += 1
        stats.stages[f"{kind}:{stage}"] += 1
    done = co.finish()
    got = outcome(co.root)
    diff = differences(got, reference)
    if done.returncode != 0 or diff:
        stats.problems.append(
            f"{co.root.name}: rc={done.returncode} differs={diff[:4]} "
            f"{done.stderr[-300:] if done.returncode else ''}"
        )
    stats.kills += kills
    stats.kills_identical += kills if (done.returncode == 0 and not diff) else 0
    stats.regenerated += len(RequestCache(co.cache).duplicates(since=started))


def kill_suite(
    work: Path, reference: dict, reference_seconds: float, per_kind: int, per_round: int, seed: int
) -> KillStats:
    """`per_kind` kills of each kind, in rounds of at most `per_round` kills."""
    rng, stats = random.Random(seed), KillStats()
    # Kills fall in the first ~30% of a full run's time; as finished jobs persist, later
    # kills of a round land in later stages.
    horizon = max(3.0, 0.3 * reference_seconds)
    for kind in ("snakemake", "job"):
        target, r = stats.kills + per_kind, 0
        while stats.kills < target:
            co = Checkout(work / f"kill-{kind}-{r}")
            kill_round(co, kind, min(per_round, target - stats.kills), horizon, rng, reference, stats)
            r += 1
            if r > 4 * per_kind:  # every run finished before its kill: the horizon is wrong
                stats.problems.append(f"{kind}: could not land {per_kind} kills")
                break
    return stats
