"""The request cache (retrace.store.cache): keys, round trips, atomic batches, sharing between processes
and hosts (first write wins, set-aside of damaged entries), packed segments (a killed writer loses
only its batch in flight; a few files, not one per request) and the earlier layout still read."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest
from fake_backend import FINGERPRINT

from retrace.store.cache import RequestCache, request_key
from retrace.util.records import Completion, Message, Request, Sampling, TokenLogprob

IDENTITY = {"backend": "scripted", "chat_template": "embedded"}
BASE = Request(
    messages=(Message("system", "be brief"), Message("user", "2+3?")),
    sampling=Sampling(temperature=0.7, top_p=0.95, max_tokens=64, stop=("\n\n",), seed=11),
    sample_index=2,
    tag="p#2",
)


def completion(text: str = "5", **changes) -> Completion:
    return Completion(text=text, finish_reason="stop", prompt_tokens=9, generated_tokens=1, **changes)


@pytest.fixture
def cache(tmp_path):
    c = RequestCache(tmp_path / "requests", job="job-a")
    yield c
    c.close()


def test_round_trip_keeps_every_field(cache):
    full = Completion(
        text="the answer is \\boxed{5}",
        finish_reason="length",
        prompt_tokens=12,
        generated_tokens=7,
        cached_prompt_tokens=4,
        latency_s=0.25,
        logprobs=(TokenLogprob("5", -0.1, (("5", -0.1), ("6", -2.5))),),
    )
    plain = completion("no logprobs")
    cache.put_many([("k1", BASE, full), ("k2", BASE, plain)])
    found = cache.get_many(["k1", "k2", "absent"])
    assert found == {"k1": full, "k2": plain}
    assert cache.count() == 2


def key(request: Request = BASE, fingerprint: str = FINGERPRINT, identity: dict = IDENTITY) -> str:
    return request_key(fingerprint, identity, request)


def test_key_is_stable_and_ignores_the_tag():
    assert key() == key(dataclasses.replace(BASE, tag="another tag"))
    rebuilt = Request(
        messages=tuple(BASE.messages), sampling=Sampling.from_dict(BASE.sampling.to_dict()), sample_index=2
    )
    assert key() == key(rebuilt)


@pytest.mark.parametrize(
    "variant",
    [
        {"fingerprint": "e" * 64},
        {"identity": {**IDENTITY, "chat_template": "chatml"}},
        {"identity": {**IDENTITY, "backend": "vllm"}},
        {"request": dataclasses.replace(BASE, messages=(Message("user", "2+3?"),))},
        {
            "request": dataclasses.replace(
                BASE, messages=(Message("system", "be brief"), Message("user", "2+4?"))
            )
        },
        {"request": dataclasses.replace(BASE, sampling=dataclasses.replace(BASE.sampling, temperature=0.8))},
        {"request": dataclasses.replace(BASE, sampling=dataclasses.replace(BASE.sampling, max_tokens=65))},
        {"request": dataclasses.replace(BASE, sampling=dataclasses.replace(BASE.sampling, stop=()))},
        {"request": dataclasses.replace(BASE, sampling=dataclasses.replace(BASE.sampling, seed=12))},
        {"request": dataclasses.replace(BASE, sample_index=3)},
        {"request": dataclasses.replace(BASE, continue_final=True)},
        {"request": dataclasses.replace(BASE, sampling=dataclasses.replace(BASE.sampling, ignore_eos=True))},
    ],
    ids=[
        "fingerprint",
        "chat_template",
        "backend",
        "messages",
        "content",
        "temperature",
        "max_tokens",
        "stop",
        "seed",
        "sample_index",
        "continue_final",
        "ignore_eos",
    ],
)
def test_key_changes_with_anything_that_decides_the_output(variant):
    assert key(**variant) != key()


def test_a_field_added_later_leaves_existing_keys_alone():
    # ignore_eos (added for the probe) is serialised only when set: every cached request made
    # before it keeps its key, and a round trip keeps the flag.
    assert "ignore_eos" not in BASE.sampling.to_dict()
    eos = dataclasses.replace(BASE.sampling, ignore_eos=True)
    assert (
        Sampling.from_dict(eos.to_dict()) == eos
        and Sampling.from_dict(BASE.sampling.to_dict()) == BASE.sampling
    )


def test_put_many_refuses_a_bad_key_before_writing_anything(cache):
    # Keys become file names: one that is not a plain token refuses the whole batch.
    for bad in (["not", "a", "key"], "../escape", "a/b", ""):
        with pytest.raises(ValueError, match="invalid request-cache key"):
            cache.put_many([("k1", BASE, completion()), (bad, BASE, completion())])
    assert cache.count() == 0
    cache.put_many([("k1", BASE, completion())])  # the handle is still usable
    assert cache.count() == 1


def test_put_many_writes_nothing_when_the_batch_fails_midway(cache):
    def batch():
        yield "k1", BASE, completion()
        raise RuntimeError("engine died")

    with pytest.raises(RuntimeError):
        cache.put_many(batch())
    assert cache.count() == 0 and cache.get_many(["k1"]) == {}


def test_first_write_of_a_key_wins(cache):
    cache.put_many([("k", BASE, completion("first"))])
    cache.put_many([("k", BASE, completion("second"))])
    assert cache.get_many(["k"])["k"].text == "first"


def test_two_handles_on_one_file_see_each_other(tmp_path):
    path = tmp_path / "shared"
    a, b = RequestCache(path, job="a"), RequestCache(path, job="b")
    try:
        a.put_many([("from-a", BASE, completion("A"))])
        b.put_many([("from-b", BASE, completion("B"))])
        assert {k: c.text for k, c in b.get_many(["from-a", "from-b"]).items()} == {
            "from-a": "A",
            "from-b": "B",
        }
        assert {k: c.text for k, c in a.get_many(["from-a", "from-b"]).items()} == {
            "from-a": "A",
            "from-b": "B",
        }
        b.record_hits(["from-a"])
        assert a.hits_for("b") == 1
    finally:
        a.close(), b.close()


def test_a_write_from_another_process_is_visible(cache):
    code = textwrap.dedent(f"""
        from retrace.store.cache import RequestCache
        from retrace.util.records import Completion, Request
        c = RequestCache({str(cache.path)!r}, job="other")
        c.put_many([("other-key", Request(), Completion("from child", "stop", 1, 2))])
        c.close()
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert cache.get_many(["other-key"])["other-key"].text == "from child"


def test_get_many_handles_many_keys(cache):
    cache.put_many([(f"k{i}", BASE, completion(str(i))) for i in range(1200)])
    found = cache.get_many([f"k{i}" for i in range(1300)])
    assert len(found) == 1200 and found["k1199"].text == "1199"


def test_hit_log_counts_per_job(tmp_path):
    path = tmp_path / "requests"
    a, b = RequestCache(path, job="job-a"), RequestCache(path, job="job-b")
    try:
        a.record_hits(["k1", "k2"])
        a.record_hits(["k1"])
        b.record_hits(["k3"])
        assert (a.hits_for("job-a"), a.hits_for("job-b"), a.hits_for("job-c")) == (3, 1, 0)
    finally:
        a.close(), b.close()


WRITER = textwrap.dedent("""
    import sys
    from retrace.store.cache import RequestCache
    from retrace.util.records import Completion, Request
    path, name = sys.argv[1], sys.argv[2]
    c = RequestCache(path, job=name)
    for i in range(40):  # keys shared by every writer, and keys of its own
        c.put_many([(f"shared{i}", Request(), Completion(name, "stop", 1, 1)),
                    (f"{name}-{i}", Request(), Completion(name, "stop", 1, 1))])
        c.record_hits([f"shared{i}"])
""")


def test_concurrent_writers_never_corrupt_and_the_first_write_wins(tmp_path):
    # Stands in for jobs on several nodes: separate processes, no shared locks.
    path = tmp_path / "requests"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{n}"]) for n in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    cache = RequestCache(path)
    found = cache.get_many(
        [f"shared{i}" for i in range(40)] + [f"w{n}-{i}" for n in range(4) for i in range(40)]
    )
    assert len(found) == 200 and cache.count() == 200
    assert {c.text for k, c in found.items() if k.startswith("shared")} <= {"w0", "w1", "w2", "w3"}
    assert not list(path.rglob(".tmp-*")), "temporary files were left behind"
    assert [cache.hits_for(f"w{n}") for n in range(4)] == [40] * 4


def _rewrite_entry(cache: RequestCache, key: str, new: bytes) -> bytes:
    """Replace a packed entry's bytes (its segment holds it alone); what a reader will read."""
    segment, offset, length = cache._index.get(key)
    path = cache.path / "segments" / segment
    path.write_bytes(path.read_bytes()[:offset] + new)
    return new[:length]


def test_an_unreadable_entry_is_set_aside_and_regenerated(cache):
    cache.put_many([("k1", BASE, completion("first"))])
    _rewrite_entry(cache, "k1", b"\0" * 40)  # what a machine that lost power may leave behind
    assert cache.get_many(["k1"]) == {}
    assert [p.name.split(".")[0] for p in cache.set_aside()] == ["k1"]
    cache.put_many([("k1", BASE, completion("again"))])
    assert cache.get_many(["k1"])["k1"].text == "again"
    assert RequestCache(cache.path).get_many(["k1"])["k1"].text == "again"  # for a new reader too


def test_a_torn_hit_log_line_is_skipped(cache):
    cache.record_hits(["k1", "k2"])
    with open(cache._hits_file, "a") as f:
        f.write('{"key": "k3", "jo')  # the writer was killed mid-line
    assert cache.hits_for("job-a") == 2
    assert [h["key"] for h in cache.hits(since=0)] == ["k1", "k2"]


def test_hits_since_a_time(cache):
    cache.record_hits(["old"])
    mark = cache.hits()[0]["at"] + 1e-6
    import time

    time.sleep(0.01)
    cache.record_hits(["new"])
    assert [h["key"] for h in cache.hits(since=mark)] == ["new"]


def test_a_file_where_the_cache_directory_should_be_is_refused(tmp_path):
    (tmp_path / "requests.sqlite").write_bytes(b"SQLite format 3\0")
    with pytest.raises(ValueError, match="is a file"):
        RequestCache(tmp_path / "requests.sqlite")


def _damage(cache: RequestCache, key: str, kind: str) -> bytes:
    """Each way an entry can be wrong (what a crash, a copy or a stray tool may leave); the
    bytes a reader then reads."""
    import json

    segment, offset, length = cache._index.get(key)
    good = (cache.path / "segments" / segment).read_bytes()[offset : offset + length]
    bad = {
        "truncated": lambda: good[: len(good) // 2],
        "zero-length": lambda: b"",
        "garbage": lambda: b"\xff\xfe\x00garbage\x9c",
        "wrong-key": lambda: json.dumps({**json.loads(good), "key": "k2"}).encode(),  # another's entry
        "not-an-object": lambda: b"[1, 2]",
        "wrong-types": lambda: json.dumps(
            {**json.loads(good), "completion": {**json.loads(good)["completion"], "text": 5}}
        ).encode(),
    }[kind]()
    return _rewrite_entry(cache, key, bad)


@pytest.mark.parametrize(
    "kind", ["truncated", "zero-length", "garbage", "wrong-key", "not-an-object", "wrong-types"]
)
def test_a_damaged_entry_is_never_returned_but_kept_aside_and_regenerated(cache, kind):
    cache.put_many([("k1", BASE, completion("first"))])
    damaged = _damage(cache, "k1", kind)
    assert cache.get_many(["k1"]) == {}
    [aside] = cache.set_aside()
    assert aside.read_bytes() == damaged, "the damaged bytes must be kept, not deleted"
    assert cache.count() == 0
    cache.put_many([("k1", BASE, completion("again"))])
    assert cache.get_many(["k1"])["k1"].text == "again"
    assert cache.duplicates() == []  # the entry was gone: regenerating it is no duplicate


def test_two_readers_setting_aside_the_same_entry_both_miss_quietly(tmp_path):
    a, b = RequestCache(tmp_path / "r", job="a"), RequestCache(tmp_path / "r", job="b")
    a.put_many([("k1", BASE, completion())])
    assert b.get_many(["k1"])  # b has the entry in its index view
    _rewrite_entry(a, "k1", b"{")
    assert a.get_many(["k1"]) == {}
    place = b._index.get("k1")
    assert b._revoke("k1", place, ValueError("again")) is None  # b raced a: nothing more happens
    assert b.get_many(["k1"]) == {} and len(a.set_aside()) == 1


def test_a_request_generated_while_its_entry_existed_is_logged_as_a_duplicate(tmp_path):
    first, late = RequestCache(tmp_path / "r", job="first"), RequestCache(tmp_path / "r", job="late")
    first.put_many([("k1", BASE, completion("one"))])
    assert first.duplicates() == []
    late.put_many([("k1", BASE, completion("two", latency_s=2.0)), ("k2", BASE, completion("new"))])
    [dup] = first.duplicates()
    assert (dup["key"], dup["job"]) == ("k1", "late")
    assert dup["at"] - dup["started"] == pytest.approx(2.0, abs=0.5)  # generation began 2 s before
    assert late.get_many(["k1"])["k1"].text == "one"  # the first write won
    assert late.duplicates(since=late.duplicates()[0]["at"] + 1) == []


def test_a_full_disk_fails_the_batch_clearly_and_leaves_no_part_behind(cache, monkeypatch):
    import os

    cache.put_many([("k0", BASE, completion())])
    real = os.write

    def full(fd, data):  # what a full filesystem does: a partial write, then ENOSPC
        real(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left") as e:
        cache.put_many([("k1", BASE, completion())])
    assert "cannot be written" in str(e.value) and "rerun" in str(e.value)  # what to do, in one line
    monkeypatch.undo()
    assert cache.keys() == {"k0"} and not list(cache.path.rglob(".tmp-*"))
    [segment] = (cache.path / "segments").iterdir()  # the partial batch was cut off
    assert segment.read_bytes().count(b"\n") == 1 and segment.read_bytes().endswith(b"\n")
    cache.put_many([("k1", BASE, completion())])
    assert set(cache.get_many(["k0", "k1"])) == {"k0", "k1"}


def test_a_duplicate_records_when_its_batch_was_looked_up(tmp_path):
    first, late = RequestCache(tmp_path / "r", job="first"), RequestCache(tmp_path / "r", job="late")
    first.put_many([("k1", BASE, completion("one"))])
    late.put_many([("k1", BASE, completion("two", latency_s=2.0))], looked_up=123.0)
    assert [d["started"] for d in first.duplicates()] == [123.0]


# A writer that commits batches of 5 until it is killed; batch 7 dies between its segment
# write and its index lines (SIGKILL: no cleanup runs), i.e. mid-segment.
KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from retrace.store import cache_store
    from retrace.store.cache import RequestCache
    from retrace.util.records import Completion, Request
    real = cache_store.Segments.append
    def append(self, blobs):
        out = real(self, blobs)
        if b'"b7-0"' in blobs[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    cache_store.Segments.append = append
    c = RequestCache(sys.argv[1], job="killed")
    for b in range(100):
        c.put_many([(f"b{b}-{i}", Request(), Completion(f"{b}.{i}", "stop", 1, 1)) for i in range(5)])
""")


def test_a_writer_killed_mid_segment_loses_only_its_unindexed_batch(tmp_path):
    path = tmp_path / "requests"
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], timeout=120)
    assert proc.returncode == -9
    [segment] = (path / "segments").iterdir()
    assert b'"b7-4"' in segment.read_bytes()  # batch 7 reached the segment, not the index
    rerun = RequestCache(path, job="rerun")
    sealed = [f"b{b}-{i}" for b in range(7) for i in range(5)]
    assert rerun.keys() == set(sealed)
    assert {k: c.text for k, c in rerun.get_many(sealed).items()} == {
        f"b{b}-{i}": f"{b}.{i}" for b in range(7) for i in range(5)
    }
    # the lost batch is generated again, as a first write (no duplicate), and served
    rerun.put_many([(f"b7-{i}", BASE, completion(f"again{i}")) for i in range(5)])
    assert rerun.get_many(["b7-0"])["b7-0"].text == "again0" and rerun.duplicates() == []


def test_a_torn_index_line_is_never_read_and_cut_by_the_next_writer(tmp_path):
    from retrace.store.cache_index import shard_of

    a = RequestCache(tmp_path / "r", job="a")
    a.put_many([("k1", BASE, completion("one"))])
    shard = tmp_path / "r" / "index" / f"{shard_of('k2')}.idx"
    with open(shard, "a") as f:  # an index writer killed mid-line
        f.write("k2\tsomewhere.seg\t0")
    b = RequestCache(tmp_path / "r", job="b")
    assert b.get_many(["k1", "k2"]).keys() == {"k1"}
    b.put_many([("k2", BASE, completion("two"))])
    assert {k: c.text for k, c in RequestCache(tmp_path / "r").get_many(["k1", "k2"]).items()} == {
        "k1": "one",
        "k2": "two",
    }


CONCURRENT_WRITER = textwrap.dedent("""
    import sys
    from retrace.store.cache import RequestCache
    from retrace.util.records import Completion, Request
    path, name = sys.argv[1], sys.argv[2]
    c = RequestCache(path, job=name)
    for b in range(50):  # each batch spreads over every index shard
        c.put_many([(f"{name}-{b}-{i}", Request(), Completion(name, "stop", 1, 1)) for i in range(20)])
""")


def test_concurrent_writers_on_one_cache_lose_nothing(tmp_path):
    path = tmp_path / "requests"
    procs = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(path), f"w{n}"]) for n in range(6)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * 6
    expected = {f"w{n}-{b}-{i}" for n in range(6) for b in range(50) for i in range(20)}
    cache = RequestCache(path)
    assert cache.keys() == expected and len(cache.get_many(expected)) == len(expected)
    assert not list((path / "index").glob("*.lease"))


def test_many_batches_make_a_few_files_not_one_per_request(cache):
    for b in range(300):
        cache.put_many([(f"k{b}-{i}", BASE, completion()) for i in range(4)])
        cache.record_hits([f"k{b}-0"])
    files = [p for p in cache.path.rglob("*") if p.is_file() and p.suffix != ".lock"]
    assert cache.count() == 1200 and len(files) <= 1 + 16 + 1  # segment, index shards, log


def test_a_cache_in_the_earlier_one_file_per_request_layout_is_still_read(tmp_path):
    import json

    path = tmp_path / "requests"
    old = path / "objects" / "k1"[:2] / "k1.json"
    old.parent.mkdir(parents=True)
    body = {"key": "k1", "completion": completion("old").to_dict(), "request": {}, "created": 1.0}
    old.write_text(json.dumps(body))
    cache = RequestCache(path, job="new")
    assert cache.get_many(["k1"])["k1"].text == "old" and cache.keys() == {"k1"}
    cache.put_many([("k1", BASE, completion("new")), ("k2", BASE, completion("k2"))])
    assert cache.get_many(["k1"])["k1"].text == "old"  # the first write still wins
    assert [d["key"] for d in cache.duplicates()] == ["k1"] and cache.keys() == {"k1", "k2"}


def test_cache_files_get_the_umask_mode_so_a_group_can_share_the_cache(tmp_path):
    import os
    import stat

    old = os.umask(0o027)
    try:
        c = RequestCache(tmp_path / "r", job="a")
        c.put_many([("k1", BASE, completion())])
        c.record_hits(["k1"])
    finally:
        os.umask(old)
    files = [p for p in c.path.rglob("*") if p.is_file()]
    assert {p.relative_to(c.path).parts[0] for p in files} == {"segments", "index", "logs"}
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o640}
