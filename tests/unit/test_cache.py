"""The request cache (retrace.cache): keys, round trips, atomic batches, sharing between processes
and hosts (no locks, first write wins, set-aside of damaged entries)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest
from fake_backend import FINGERPRINT

from retrace.cache import RequestCache, request_key
from retrace.records import Completion, Message, Request, Sampling, TokenLogprob

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
        from retrace.cache import RequestCache
        from retrace.records import Completion, Request
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
    from retrace.cache import RequestCache
    from retrace.records import Completion, Request
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


def test_an_unreadable_entry_is_set_aside_and_regenerated(cache):
    cache.put_many([("k1", BASE, completion("first"))])
    entry = next(cache.objects.glob("*/k1.json"))
    entry.write_text("")  # what a machine that lost power may leave behind
    assert cache.get_many(["k1"]) == {}
    assert list(entry.parent.glob("k1.json.*.corrupt"))
    cache.put_many([("k1", BASE, completion("again"))])
    assert cache.get_many(["k1"])["k1"].text == "again"


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


def _damage(entry, kind: str) -> None:
    """Each way an entry file can be wrong: what a crash, a copy or a stray tool may leave."""
    import json

    good = entry.read_bytes()
    if kind == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    elif kind == "zero-length":
        entry.write_bytes(b"")
    elif kind == "garbage":
        entry.write_bytes(b"\xff\xfe\x00garbage\x9c")
    elif kind == "wrong-key":  # a well-formed entry of another request, under this name
        entry.write_text(json.dumps({**json.loads(good), "key": "k2"}))
    elif kind == "not-an-object":
        entry.write_text("[1, 2]")
    elif kind == "wrong-types":
        d = json.loads(good)
        d["completion"]["text"] = 5
        entry.write_text(json.dumps(d))


@pytest.mark.parametrize(
    "kind", ["truncated", "zero-length", "garbage", "wrong-key", "not-an-object", "wrong-types"]
)
def test_a_damaged_entry_is_never_returned_but_kept_aside_and_regenerated(cache, kind):
    cache.put_many([("k1", BASE, completion("first"))])
    entry = next(cache.objects.glob("*/k1.json"))
    _damage(entry, kind)
    damaged = entry.read_bytes()
    assert cache.get_many(["k1"]) == {}
    [aside] = cache.set_aside()
    assert aside.read_bytes() == damaged, "the damaged file must be kept, not deleted"
    assert cache.count() == 0
    cache.put_many([("k1", BASE, completion("again"))])
    assert cache.get_many(["k1"])["k1"].text == "again"
    assert cache.duplicates() == []  # the entry was gone: regenerating it is no duplicate


def test_two_readers_setting_aside_the_same_entry_both_miss_quietly(tmp_path):
    a, b = RequestCache(tmp_path / "r", job="a"), RequestCache(tmp_path / "r", job="b")
    a.put_many([("k1", BASE, completion())])
    entry = next(a.objects.glob("*/k1.json"))
    entry.write_bytes(b"{")
    assert a.get_many(["k1"]) == {}
    a._set_aside(entry, ValueError("again"))  # b raced a to the rename: no error
    assert b.get_many(["k1"]) == {} and len(a.set_aside()) == 1


def test_a_request_generated_while_its_entry_existed_is_logged_as_a_duplicate(tmp_path):
    first, late = RequestCache(tmp_path / "r", job="first"), RequestCache(tmp_path / "r", job="late")
    first.put_many([("k1", BASE, completion("one"))])
    assert first.duplicates() == []
    late.put_many([("k1", BASE, completion("two", latency_s=2.0)), ("k2", BASE, completion("new"))])
    [dup] = first.duplicates()
    assert (dup["key"], dup["job"]) == ("k1", "late")
    assert dup["started"] == pytest.approx(dup["at"] - 2.0)  # generation began 2 s before
    assert late.get_many(["k1"])["k1"].text == "one"  # the first write won
    assert late.duplicates(since=late.duplicates()[0]["at"] + 1) == []


def test_a_full_disk_fails_the_batch_clearly_and_leaves_no_file_behind(cache, monkeypatch):
    from pathlib import Path

    real = Path.write_text

    def full(self, data, *a, **k):  # what a full filesystem does: a partial write, then ENOSPC
        real(self, data[:10], *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError, match="No space left"):
        cache.put_many([("k1", BASE, completion())])
    monkeypatch.undo()
    assert cache.count() == 0 and not list(cache.path.rglob(".tmp-*"))


def test_a_duplicate_records_when_its_batch_was_looked_up(tmp_path):
    first, late = RequestCache(tmp_path / "r", job="first"), RequestCache(tmp_path / "r", job="late")
    first.put_many([("k1", BASE, completion("one"))])
    late.put_many([("k1", BASE, completion("two", latency_s=2.0))], looked_up=123.0)
    assert [d["started"] for d in first.duplicates()] == [123.0]
