"""The request cache under a cluster's faults: locks that die with their holder (record locks and
leases), SIGTERM releasing them, per-shard locks, a re-read before set-aside, the sorted on-disk
index (bisection, compaction, readers following a compaction) and a read-only cache folder.

    .venv/bin/python -m pytest -q tests/unit/test_cache_cluster.py
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from retrace.store import cache_index, cache_lock
from retrace.store.cache import RequestCache
from retrace.store.cache_index import Base, shard_of
from retrace.util.records import Completion, Request


def done(text: str = "5") -> Completion:
    return Completion(text=text, finish_reason="stop", prompt_tokens=9, generated_tokens=1)


# A process that takes shard 3's lock, says so, and waits to be killed holding it.
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from retrace.store.cache_lock import shard_lock
    from retrace.util.stop import stopping
    with stopping():
        with shard_lock(Path(sys.argv[1])):
            print("held", flush=True)
            time.sleep(600)
""")


def _holder(lock, kind):
    env = {**os.environ, "RETRACE_CACHE_LOCK": kind}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _waiter(lock) -> threading.Event:
    """A thread of this process waiting for the lock; the event is set once it got it."""
    got = threading.Event()

    def take():
        with cache_lock.shard_lock(lock):
            got.set()

    threading.Thread(target=take, daemon=True).start()
    return got


@pytest.mark.parametrize("kind", ["fcntl", "lease"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_next_writer_gets_the_lock_after_its_holder_is_killed(tmp_path, monkeypatch, kind, sig):
    monkeypatch.setenv("RETRACE_CACHE_LOCK", kind)
    lock = tmp_path / "3.lock"
    proc = _holder(lock, kind)
    waiter = _waiter(lock)
    assert not waiter.wait(0.3), "the lock must exclude while its holder lives"
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == -sig  # SIGTERM too ends by its signal (conventional status)
    # a generous bound, not a timing: a stale lock used to hold the next writer 60 s
    assert waiter.wait(30), f"lock ({kind}) still held after its holder got {sig.name}"


def test_sigterm_releases_a_lease_on_the_way_out(tmp_path):
    proc = _holder(tmp_path / "3.lock", "lease")
    assert (tmp_path / "3.lock.lease").exists()
    proc.terminate()
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert not (tmp_path / "3.lock.lease").exists(), "left for the next writer to break"


def test_a_lease_whose_holder_lives_on_another_host_waits_for_its_expiry():
    now = 1000.0
    alive_elsewhere = {"host": "elsewhere", "pid": 1, "start": "x", "token": "t", "expires": now + 3}
    assert not cache_lock.is_dead(alive_elsewhere, now)
    assert cache_lock.is_dead(alive_elsewhere, now + 4)
    reused_pid = {**alive_elsewhere, "host": os.uname().nodename, "pid": os.getpid(), "start": "0"}
    assert cache_lock.is_dead(reused_pid, now), "same pid, other start time: another process"


def test_shards_lock_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRACE_CACHE_LOCK", "fcntl")
    cache = RequestCache(tmp_path, job="w")
    proc = _holder(tmp_path / "index" / "3.lock", "fcntl")
    try:
        other = next(f"k{i}" for i in range(100) if shard_of(f"k{i}") != "3")
        cache.put_many([(other, Request(), done())])  # would hang on one lock for all shards
        assert cache.get_many([other])[other].text == "5"
    finally:
        proc.kill()
        proc.wait()


def test_a_short_read_is_read_again_under_the_lock_before_any_set_aside(tmp_path, monkeypatch):
    cache = RequestCache(tmp_path, job="r")
    cache.put_many([("k1", Request(), done("kept"))])
    real, calls = cache._segments.read, []

    def short_once(segment, offset, length):  # what a transient NFS short read returns
        calls.append(1)
        return (
            real(segment, offset, length)[: length // 2] if len(calls) == 1 else real(segment, offset, length)
        )

    monkeypatch.setattr(cache._segments, "read", short_once)
    assert cache.get_many(["k1"])["k1"].text == "kept" and len(calls) == 2
    assert cache.set_aside() == [] and RequestCache(tmp_path).keys() == {"k1"}


def test_bisection_finds_every_key_and_no_other(tmp_path):
    rng = random.Random(7)
    keys = sorted(
        {"".join(rng.choice("0123456789abcdef-_XYZ") for _ in range(rng.randint(1, 70))) for _ in range(3000)}
    )
    path = tmp_path / "base"
    path.write_text("".join(f"{k}\tseg-{i}\t{i}\t{len(k)}\n" for i, k in enumerate(keys)))
    base = Base(path)
    assert [base.get(k) for k in keys] == [(f"seg-{i}", i, len(k)) for i, k in enumerate(keys)]
    absent = {k + "q" for k in keys[:200]} | {"", "0", "~"}
    assert all(base.get(k) is None for k in absent - set(keys))


def test_compaction_keeps_live_entries_drops_revoked_and_readers_follow_it(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_index, "COMPACT_LINES", 6)  # a writer folds every shard often
    early = RequestCache(tmp_path, job="early")
    early.put_many([("k0", Request(), done("k0"))])
    assert early.get_many(["k0"])
    writer = RequestCache(tmp_path, job="w")
    for b in range(60):
        writer.put_many([(f"k{b}-{i}", Request(), done(f"{b}.{i}")) for i in range(8)])
    with writer._index.locked(shard_of("k3-1")):  # what a set-aside of a damaged entry appends
        writer._index.refresh([shard_of("k3-1")])
        writer._index.append(shard_of("k3-1"), ["k3-1\t-\t0\t0"])
    writer.put_many([("k3-1", Request(), done("again")), ("k0", Request(), done("second"))])
    gens = {s.gen for s in writer._index.shards.values()}
    assert max(gens) >= 2, "the logs were never folded"
    expected = {f"k{b}-{i}": f"{b}.{i}" for b in range(60) for i in range(8)} | {"k3-1": "again", "k0": "k0"}
    for handle in (early, writer, RequestCache(tmp_path, job="new")):  # early last read gen 0
        assert {k: c.text for k, c in handle.get_many(expected).items()} == expected
    assert RequestCache(tmp_path).compact() == len(expected) == RequestCache(tmp_path).count()
    assert len(list((tmp_path / "index").glob("*.sorted"))) <= 3 * 16, "old generations pile up"


def test_cache_compact_command(tmp_path, capsys):
    from retrace.cli import main

    RequestCache(tmp_path, job="w").put_many([(f"k{i}", Request(), done()) for i in range(40)])
    assert main(["cache", "compact", "--cache", str(tmp_path)]) == 0
    assert f"{tmp_path}: index compacted, 40 entries" in capsys.readouterr().out
    assert not any(p.stat().st_size for p in (tmp_path / "index").glob("*.g1.idx"))
    assert RequestCache(tmp_path).count() == 40


def test_a_read_only_cache_folder_is_one_clear_line_and_finished_work_is_served(
    tmp_path, monkeypatch, capsys
):
    cache = RequestCache(tmp_path, job="w")
    cache.put_many([("k1", Request(), done("finished"))])
    real_open = os.open

    def read_only(path, flags, *a, **kw):  # root ignores chmod: refuse writes as a ro mount does
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and str(path).startswith(str(tmp_path)):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(OSError) as e:
        cache.put_many([("k2", Request(), done())])
    line = str(e.value)
    assert "\n" not in line and f"request cache {tmp_path} cannot be written (Read-only file system" in line
    assert "requests finished before are kept" in line
    assert RequestCache(tmp_path).get_many(["k1"])["k1"].text == "finished"
