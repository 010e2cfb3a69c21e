"""Figures 2-5 and 7 of benchmarks/reliability.py: concurrent runs, damaged cache entries,
a full disk, tampered artifacts. Each returns (value, problems): value is the printed figure,
problems says what went wrong (empty when the figure holds).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import yaml
from reliability_kit import Checkout, differences, flip_byte, outcome, run_jobs

from retrace.store.cache import RequestCache


def copy_cache(src: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("logs", ".lock"))
    return dest


def concurrent_same_dir(work: Path, reference: dict, ref_cache: Path) -> tuple[str, list[str]]:
    """A second Snakemake in a directory where one runs is refused; the first finishes intact.
    Requests come from a copy of the reference cache: this is about the directory lock."""
    co = Checkout(work / "same-dir", cache=copy_cache(ref_cache, work / "same-dir-cache"))
    first = co.popen(log="first.log")
    while not run_jobs(first.pid) and first.poll() is None:
        time.sleep(0.05)
    second = co.snakemake(timeout=900)
    overlapped = first.poll() is None
    rc = first.wait()
    said = (second.stdout + second.stderr).lower()
    problems = []
    if second.returncode == 0 or "lock" not in said:
        problems.append(f"second run not refused (rc={second.returncode})")
    if not overlapped:
        problems.append("the first run ended before the second was refused: inconclusive")
    diff = differences(outcome(co.root), reference)
    if rc != 0 or diff:
        problems.append(f"first run harmed: rc={rc} differs={diff[:4]}")
    return ("refused, first unharmed" if not problems else "FAILED"), problems


EXPERIMENTS = {  # two overlapping parts of the plumbing experiment (smoke_math/majority in both)
    "plumbing_a": {"datasets": ["smoke_math", "smoke_mc"], "methods": ["majority"]},
    "plumbing_b": {"datasets": ["smoke_math"], "methods": ["majority", "greedy"]},
}


def concurrent_shared_cache(work: Path, reference: dict) -> tuple[str, list[str]]:
    """Two checkouts, one cache, overlapping experiments at once; results equal the sequential
    reference, every entry readable, no request generated twice except in a race."""
    shared = work / "shared-cache"
    shutil.rmtree(shared, ignore_errors=True)
    runs = []
    for name, part in EXPERIMENTS.items():
        co = Checkout(work / name, cache=shared)
        exp = yaml.safe_load((co.root / "config/experiment/plumbing.yaml").read_text())
        exp["runs"] = [{**run, **part} for run in exp["runs"]]
        (co.root / f"config/experiment/{name}.yaml").write_text(yaml.safe_dump(exp))
        co.write_config(name, co_overrides(co))
        runs.append(co)
    procs = [co.popen() for co in runs]
    rcs = [p.wait() for p in procs]
    problems = [f"{co.root.name}: rc={rc}" for co, rc in zip(runs, rcs) if rc]
    for co in runs:
        got = outcome(co.root)
        got = {k: v for k, v in got.items() if k.startswith(("generations/", "scores/"))}
        diff = differences(got, {k: reference.get(k) for k in got})
        problems += [f"{co.root.name}: {d} differs from the sequential run" for d in diff]
    cache = RequestCache(shared)
    keys = cache.keys()
    if len(cache.get_many(keys)) != len(keys) or cache.set_aside():
        problems.append(f"corrupt entries: {len(cache.set_aside())}")
    dups = cache.duplicates()
    late = [d for d in dups if d["started"] > _created(cache, d["key"])]
    if late:
        problems.append(f"{len(late)} requests generated after their entry existed")
    value = (
        f"{len(keys)} entries, 0 corrupt, {len(dups)} generated twice in the race window, "
        f"{len(late)} beyond it"
        if not problems
        else "FAILED"
    )
    return value, problems


def co_overrides(co: Checkout) -> list[str]:
    return yaml.safe_load((co.root / "config/config.yaml").read_text())["overrides"]


def _created(cache: RequestCache, key: str) -> float:
    import json

    cache.get_many([key])  # reads the index shard of the key
    return json.loads(cache._segments.read(*cache._index.get(key)))["created"]


DAMAGE = ("truncated", "zero-length", "wrong-key", "garbage")


def corrupt_cache_entries(work: Path, reference: dict, ref_cache: Path, seed: int) -> tuple[str, list[str]]:
    """Damage entries of a copy of the reference cache one way each; a run on it must set
    them aside, regenerate them and end with the reference results."""
    cache_dir = copy_cache(ref_cache, work / "corrupt-cache")
    co = Checkout(work / "corrupt", cache=cache_dir)
    packed = RequestCache(cache_dir)
    keys = sorted(packed.keys())
    packed.get_many(keys)  # every index shard read
    picked = random.Random(seed).sample(keys, len(DAMAGE) + 1)
    donor, victims = picked[0], dict(zip(DAMAGE, picked[1:]))
    for how, key in victims.items():  # damaged in place, each entry keeping its length
        segment, offset, length = packed._index.get(key)
        path = cache_dir / "segments" / segment
        data = path.read_bytes()
        good = data[offset : offset + length]
        bad = {
            "truncated": good[: length // 2] + b" " * (length - length // 2),
            "zero-length": b"\0" * length,  # zero-filled blocks, what a power loss may leave
            "wrong-key": good.replace(key.encode(), donor.encode()),  # another request's name
            "garbage": (bytes(range(256)) * (length // 256 + 1))[:length],
        }[how]
        path.write_bytes(data[:offset] + bad + data[offset + length :])
    started = time.time()
    done = co.snakemake()
    cache, problems, handled = RequestCache(cache_dir), [], 0
    aside = {p.name.split(".")[0] for p in cache.set_aside()}
    served = {h["key"] for h in cache.hits(since=started)}
    for how, key in victims.items():
        wrong = [
            w
            for w, bad in (
                ("not set aside", key not in aside),
                ("served", key in served),
                ("not regenerated", key not in cache.get_many([key])),
            )
            if bad
        ]
        problems += [f"{how}: {w}" for w in wrong]
        handled += not wrong
    diff = differences(outcome(co.root), reference)
    if done.returncode or diff:
        problems.append(f"run rc={done.returncode}, differs={diff[:4]}")
    found = handled
    return f"{found}/{len(victims)} detected, set aside, regenerated ({', '.join(DAMAGE)})", problems


def _mount_full(path: Path) -> bool:
    """A 64 KiB tmpfs at `path`, filled to the last byte (root only)."""
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=64", "tmpfs", str(path)], capture_output=True
    ).returncode:
        return False
    with open(path / "filler", "wb") as f:
        try:
            f.write(b"\0" * (1 << 20))
        except OSError:
            pass
    return True


def disk_full(work: Path, reference: dict, ref_cache: Path) -> tuple[str, list[str]]:
    """The generations directory on a full tmpfs: generate jobs fail saying so and leave no
    file; once space is back, a rerun regenerates them and matches the reference."""
    co = Checkout(work / "disk-full", cache=copy_cache(ref_cache, work / "disk-full-cache"))
    gens = co.root / "results/generations"
    if os.geteuid() != 0 or not _mount_full(gens):
        return "skipped (needs root to mount a tmpfs)", []
    problems = []
    try:
        failed = co.snakemake()
        logs = " ".join(p.read_text(errors="replace") for p in (co.root / "results/logs").rglob("*.log"))
        left = sorted(str(p.relative_to(gens)) for p in gens.rglob("*") if p.is_file() and p.name != "filler")
        if failed.returncode == 0:
            problems.append("the run succeeded on a full disk")
        if "No space left on device" not in logs or "was not written" not in logs:
            problems.append("no clear 'No space left on device ... was not written' in the job logs")
        if left:
            problems.append(f"files left on the full disk: {left[:4]}")
        planned = co.snakemake("-n").stdout
        if "rule generate" not in planned:
            problems.append("a dry-run would not regenerate (a half-written artifact was accepted)")
        (gens / "filler").unlink()
        again = co.snakemake()
        diff = differences(outcome(co.root), reference)
        if again.returncode or diff:
            problems.append(f"rerun with space: rc={again.returncode} differs={diff[:4]}")
    finally:
        subprocess.run(["umount", "-l", str(gens)], capture_output=True)
    return ("failed clearly, nothing half-written, rerun identical" if not problems else "FAILED"), problems


TAMPER = {  # kind of artifact -> its path under results/ in the plumbing run
    "data": "data/smoke_math.jsonl",
    "model manifest": "models/smollm2-135m-q40/manifest.json",
    "generations": "generations/smollm2-135m-q40/llamacpp/smoke_math/majority/seed0.jsonl",
    "scores": "scores/smollm2-135m-q40/llamacpp/smoke_mc/seed0/greedy.json",
    "claims": "report/claims.csv",
    "report": "report/index.html",
    "provenance record": "generations/smollm2-135m-q40/llamacpp/smoke_mc/greedy/seed0.jsonl.prov.json",
}
AUDITED = ("results/report/results.csv", "results/report/claims.csv", "results/report/index.html")


def audit_tamper(root: Path) -> tuple[str, list[str]]:
    """Flip one byte of each kind of artifact in turn (restored after); `retrace audit` of the
    report must fail and name the changed file."""
    co = Checkout.existing(root)
    problems, caught = [], 0
    for kind, rel in TAMPER.items():
        path = root / "results" / rel
        flip_byte(path)
        try:
            proc = co.retrace("audit", *AUDITED)
        finally:
            flip_byte(path)
        out = proc.stdout + proc.stderr
        if proc.returncode != 0 and f"results/{rel}" in out:
            caught += 1
        else:
            problems.append(f"{kind}: rc={proc.returncode}, {rel} named: {f'results/{rel}' in out}")
    clean = co.retrace("audit", *AUDITED)
    if clean.returncode:
        problems.append("the untouched run does not audit clean")
    return f"{caught}/{len(TAMPER)} caught ({', '.join(TAMPER)})", problems
