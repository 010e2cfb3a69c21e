"""The request cache under a cluster's faults, and its index at paper scale (`make bench-cluster`).

    PYTHONPATH=src .venv/bin/python benchmarks/cache_cluster.py [--kills 30] [--entries 10000000]

1. Kill test: writers publish batches to one cache; K times, a random writer is sent SIGKILL or
   SIGTERM (alternating) at a random moment and replaced. Each writer records every batch whose
   put_many returned (acknowledged) and how long that put_many took. Afterwards a fresh handle
   reads every acknowledged key: lost = acknowledged but not served, corrupt = served with
   another writer's text; the longest stall is the longest acknowledged put_many (it includes any
   wait for a lock a killed writer held). Run with the record locks, then with the leases
   (RETRACE_CACHE_LOCK=lease). Prints
   `cache kill test: K kills, lost L, corrupt C, longest stall S s` (goal L = C = 0, S <= 5), and
   the same line labelled `cache kill test with leases` (benchmarks/record.py keeps one value a label).
2. Index memory: a synthetic index of --entries keys (sha256-like, 16 shards) written as sorted
   bases, each shard's log filled to the fold threshold (the most a job ever holds), then a
   fresh process opens it, reads every shard and looks up --lookups keys. Prints
   `index memory per job at paper scale: X MB` (anonymous memory; goal <= 500) with the load
   time, and the shared page cache the lookups touched.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from retrace.store import cache_index
from retrace.store.cache import RequestCache

WRITER = textwrap.dedent("""
    import sys, time
    from retrace.store.cache import RequestCache
    from retrace.util.records import Completion, Request
    from retrace.util.stop import stopping
    path, name = sys.argv[1], sys.argv[2]
    c = RequestCache(path, job=name)
    with stopping(), open(f"{path}/../acks/{name}", "a") as acks:
        for b in range(10**6):
            keys = [f"{name}-{b}-{i}" for i in range(20)]
            t = time.monotonic()
            c.put_many([(k, Request(), Completion(k, "stop", 1, 1)) for k in keys])
            acks.write(f"{b}\\t{time.monotonic() - t:.4f}\\n")
            acks.flush()
""")


def _writer(root: Path, name: str, env: dict) -> subprocess.Popen:
    cmd = [sys.executable, "-c", WRITER, str(root / "cache"), name]
    return subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)  # each SIGTERM logs a line


def kill_test(kills: int, writers: int, lock: str, seed: int) -> dict:
    """Kill writers `kills` times; what was lost, served corrupt, and the longest stall."""
    rng, root = random.Random(seed), Path(tempfile.mkdtemp(prefix="retrace-kill-"))
    (root / "acks").mkdir()
    env = {**os.environ, "RETRACE_CACHE_LOCK": lock, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    live = {f"w{n}": _writer(root, f"w{n}", env) for n in range(writers)}
    sent = {"sigkill": 0, "sigterm": 0}
    time.sleep(1.0)  # let them start publishing
    for k in range(kills):
        time.sleep(rng.uniform(0.05, 0.4))
        name = rng.choice(sorted(live))
        sig = signal.SIGKILL if k % 2 == 0 else signal.SIGTERM
        live[name].send_signal(sig)
        sent[sig.name.lower()] += 1
        live.pop(name).wait()
        live[f"w{writers + k}"] = _writer(root, f"w{writers + k}", env)
    time.sleep(1.0)
    for p in live.values():
        p.terminate()
        p.wait()
    result = _verify(root)
    shutil.rmtree(root)
    return {"kills": kills, **sent, **result}


def _verify(root: Path) -> dict:
    acked, stall = [], 0.0
    for acks in (root / "acks").iterdir():
        for line in acks.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 2:  # a writer killed mid-line wrote a torn one: not acknowledged
                acked += [f"{acks.name}-{parts[0]}-{i}" for i in range(20)]
                stall = max(stall, float(parts[1]))
    found = RequestCache(root / "cache").get_many(acked)
    return {
        "acknowledged": len(acked),
        "lost": len(set(acked) - set(found)),
        "corrupt": sum(c.text != k for k, c in found.items()),
        "stall_s": stall,
    }


# ---------------------------------------------------------------- index memory
def build_index(root: Path, entries: int, seed: int) -> list[str]:
    """Write a generation-1 index of `entries` keys plus full logs; a sample of its keys."""
    shards = {f"{i:x}": [] for i in range(cache_index.SHARDS)}
    for i in range(entries):  # increasing keys: each shard's list comes out sorted
        key = f"{i * 2654435761 % 2**64:016x}{i:048x}"
        shards[cache_index.shard_of(key)].append(key)
    for name, keys in shards.items():
        keys.sort()
        with open(root / f"{name}.g1.sorted", "w") as f:
            f.writelines(f"{k}\tbench-{i % 97}.seg\t{i * 613}\t{600 + i % 300}\n" for i, k in enumerate(keys))
        with open(root / f"{name}.g1.idx", "w") as f:
            for j in range(cache_index.COMPACT_LINES):  # the most a log holds before it is folded
                f.write(f"log{name}{j:060x}\tbench-log.seg\t{j * 700}\t700\n")
    rng = random.Random(seed)
    return [rng.choice(keys) for keys in shards.values() for _ in range(8)]


PROBE = textwrap.dedent("""
    import json, random, sys, time
    from pathlib import Path
    from retrace.store.cache_index import Index
    def mem():
        f = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
        return {k: int(f[k].split()[0]) / 1024 for k in ("RssAnon", "RssFile")}
    root, sample, lookups = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
    before, t = mem(), time.monotonic()
    index = Index(root)
    index.refresh(f"{i:x}" for i in range(16))
    load = time.monotonic() - t
    rng, t = random.Random(1), time.monotonic()
    asked = [rng.choice(sample) if i % 2 else f"{rng.getrandbits(256):064x}" for i in range(lookups)]
    hits = sum(index.get(k) is not None for k in asked)
    after = mem()
    print(json.dumps({"load_s": load, "lookup_s": time.monotonic() - t, "hits": hits,
                      "anon_mb": after["RssAnon"] - before["RssAnon"],
                      "file_mb": after["RssFile"] - before["RssFile"]}))
""")


def index_memory(entries: int, lookups: int, seed: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="retrace-index-"))
    try:
        t = time.monotonic()
        sample = build_index(root, entries, seed)
        built = time.monotonic() - t
        size = sum(p.stat().st_size for p in root.iterdir()) / 2**20
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(root), json.dumps(sample), str(lookups)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return {**json.loads(out.stdout), "built_s": built, "index_mb": size}
    finally:
        shutil.rmtree(root)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=30, help="kills per lock kind (half SIGKILL, half SIGTERM)")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--entries", type=int, default=10_000_000, help="synthetic index size (paper: ~10M)")
    ap.add_argument("--lookups", type=int, default=100_000, help="keys one job looks up")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    ok = True
    for lock in ("fcntl", "lease"):
        r = kill_test(a.kills, a.writers, lock, a.seed)
        label = "cache kill test" if lock == "fcntl" else f"cache kill test with {lock}s"  # one value each
        print(
            f"{label}: {r['kills']} kills, lost {r['lost']}, corrupt {r['corrupt']}, "
            f"longest stall {r['stall_s']:.2f} s  ({lock} locks; {r['sigkill']} SIGKILL, {r['sigterm']} SIGTERM; "
            f"{r['acknowledged']} acknowledged requests)"
        )
        ok &= r["lost"] == r["corrupt"] == 0 and r["stall_s"] <= 5
    m = index_memory(a.entries, a.lookups, a.seed)
    scale = "paper scale" if a.entries >= 10_000_000 else f"{a.entries:,} entries"
    print(
        f"index memory per job at {scale}: {m['anon_mb']:.0f} MB  (load {m['load_s']:.1f} s; "
        f"{a.lookups:,} lookups {m['lookup_s']:.1f} s, {m['file_mb']:.0f} MB of shared page cache touched; "
        f"index {m['index_mb']:.0f} MB on disk, {a.entries:,} entries + full logs, built in {m['built_s']:.0f} s)"
    )
    ok &= m["anon_mb"] <= 500
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
