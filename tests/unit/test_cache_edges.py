"""The request cache's edges (retrace.store.cache): the logs' time filters and the earlier layout's
duplicate logs, damaged entries of the earlier one-file-per-request layout, the one-line message
of a cache that cannot be written (compaction too), and the key names in a damaged entry's
message. Each test states what a user or a later job must see.

    .venv/bin/python -m pytest -q tests/unit/test_cache_edges.py
"""

from __future__ import annotations

import errno
import json
import os

import pytest

from retrace.store import cache_index
from retrace.store.cache import RequestCache, _parse_entry
from retrace.util.records import Completion, Request


def completion(text: str = "5") -> Completion:
    return Completion(text=text, finish_reason="stop", prompt_tokens=9, generated_tokens=1)


def _log(cache: RequestCache, folder: str, records: list[dict]) -> None:
    path = cache.path / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "w.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_hits_since_a_time_include_a_hit_at_exactly_that_time(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    _log(cache, "logs", [{"kind": "hit", "key": "a", "job": "j", "at": 100.0}])
    assert [h["key"] for h in cache.hits(since=100.0)] == ["a"]
    assert cache.hits(since=100.5) == []


def test_a_hit_without_a_time_is_not_after_any_positive_time(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    _log(cache, "logs", [{"kind": "hit", "key": "a", "job": "j"}])
    assert cache.hits_for("j") == 1 and cache.hits(since=0.5) == []


def test_the_earlier_layouts_duplicate_logs_are_read_even_without_a_time(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    _log(cache, "duplicates", [{"key": "old", "job": "j"}, {"key": "older", "job": "j", "at": 0.5}])
    assert [d["key"] for d in cache.duplicates()] == ["old", "older"]
    assert [d["key"] for d in cache.duplicates(since=0.4)] == ["older"]  # no time: not after 0.4
    assert cache.hits() == []  # a duplicate is no hit


def _legacy(path, key: str, body: dict | str) -> None:
    """An entry of the earlier layout: objects/<first two characters of the key>/<key>.json."""
    old = path / "objects" / key[:2] / f"{key}.json"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text(body if isinstance(body, str) else json.dumps(body))


@pytest.mark.parametrize(
    "body",
    [
        {"key": "other1", "completion": completion().to_dict()},  # another request's entry
        "{not json",
        {"key": "abc1", "completion": "not an object"},
    ],
)
def test_an_unusable_earlier_layout_entry_is_set_aside_and_the_rest_served(tmp_path, body):
    path = tmp_path / "r"
    _legacy(path, "abc1", body)
    _legacy(path, "abc2", {"key": "abc2", "completion": completion("kept").to_dict()})
    cache = RequestCache(path, job="j")
    assert {k: c.text for k, c in cache.get_many(["abc1", "abc2", "absent"]).items()} == {"abc2": "kept"}
    assert [p.name for p in cache.set_aside()] == [f"abc1.json.{cache._writer}.corrupt"]
    assert (path / "objects" / "ab" / f"abc1.json.{cache._writer}.corrupt").is_file()


def test_an_earlier_layout_entry_set_aside_by_another_reader_first_is_a_quiet_miss(tmp_path, monkeypatch):
    path = tmp_path / "r"
    _legacy(path, "k1", {"key": "k1", "completion": "not an object"})
    cache = RequestCache(path, job="j")
    real = os.replace

    def raced(src, dst):  # the other reader moved it between our read and our move
        real(src, f"{src}.other.corrupt")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", raced)
    assert cache.get_many(["k1"]) == {}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_a_full_or_read_only_cache_says_what_to_do_when_compacting(tmp_path, monkeypatch, code):
    cache = RequestCache(tmp_path / "r", job="j")

    def fail(self):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(cache_index.Index, "compact", fail)
    with pytest.raises(OSError, match="cannot be written") as e:
        cache.compact()
    assert str(cache.path) in str(e.value) and e.value.errno == code
    assert f"({os.strerror(code)}: {cache.path})" in str(e.value)  # no file named: the cache is


def test_any_other_io_error_passes_through_unchanged(tmp_path, monkeypatch):
    cache = RequestCache(tmp_path / "r", job="j")
    io = OSError(errno.EIO, "Input/output error")

    def fail(self, blobs):
        raise io

    monkeypatch.setattr(type(cache._segments), "append", fail)
    with pytest.raises(OSError) as e:
        cache.put_many([("k1", Request(), completion())])
    assert e.value is io


def test_an_entry_holding_another_key_names_both_by_their_first_16_characters():
    mine, theirs = "a" * 15 + "bcdef", "z" * 15 + "yxwvu"
    raw = json.dumps({"key": theirs, "completion": completion().to_dict()}).encode()
    with pytest.raises(KeyError) as e:
        _parse_entry(raw, mine)
    assert f"{theirs[:16]!r}…, not {mine[:16]!r}…" in str(e.value)


def test_a_cache_folder_is_made_with_its_missing_parents(tmp_path):
    cache = RequestCache(tmp_path / "a" / "b" / "requests", job="j")
    cache.put_many([("k1", Request(), completion())])
    assert cache.get_many(["k1"])["k1"].text == "5"


def test_duplicates_since_a_time_include_one_at_exactly_that_time(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    _log(cache, "logs", [{"kind": "duplicate", "key": "a", "job": "j", "at": 100.0}])
    assert [d["key"] for d in cache.duplicates(since=100.0)] == ["a"]
    assert cache.duplicates(since=100.5) == []


def test_the_earlier_layouts_hit_logs_are_hits_not_duplicates(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    path = cache.path / "hits" / "j"
    path.mkdir(parents=True)
    (path / "w.jsonl").write_text(json.dumps({"key": "a", "job": "j", "at": 5.0}) + "\n")
    cache.record_hits(["b"])
    assert sorted(h["key"] for h in cache.hits()) == ["a", "b"] and cache.duplicates() == []


def test_a_log_line_torn_by_a_full_disk_hides_no_later_line(tmp_path):
    """The same writer appends after its torn line once space is freed."""
    cache = RequestCache(tmp_path / "r", job="j")
    cache.record_hits(["a"])
    with open(cache._hits_file, "a") as f:
        f.write('{"kind": "hit", "key": "tor')
    with open(cache._hits_file, "a") as f:
        f.write("\n")
    cache.record_hits(["b"])
    assert [h["key"] for h in cache.hits()] == ["a", "b"]


def test_a_removed_segment_is_a_miss_and_regenerated(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    cache.put_many([("k1", Request(), completion("one"))])
    for segment in (cache.path / "segments").iterdir():
        segment.unlink()  # removed by hand
    assert cache.get_many(["k1"]) == {}
    cache.put_many([("k1", Request(), completion("again"))])
    assert cache.get_many(["k1"])["k1"].text == "again"


def test_two_damaged_entries_are_both_set_aside(tmp_path):
    cache = RequestCache(tmp_path / "r", job="j")
    cache.put_many([("k1", Request(), completion())])
    cache.put_many([("k2", Request(), completion())])
    for segment in (cache.path / "segments").iterdir():
        segment.write_bytes(b"\0" * segment.stat().st_size)
    assert cache.get_many(["k1"]) == {} and cache.get_many(["k2"]) == {}
    assert sorted(p.name.split(".")[0] for p in cache.set_aside()) == ["k1", "k2"]


def test_a_duplicate_in_a_batch_does_not_keep_the_rest_of_its_shard_out_of_the_index(tmp_path):
    # keys of one index shard (chosen by the shard function itself): one already indexed, then
    # a batch where it comes first and two new ones follow; every new entry must be indexed
    keys = [k for k in (f"key-{i}" for i in range(500)) if cache_index.shard_of(k) == "3"][:3]
    req = Request(messages=())
    first = RequestCache(tmp_path / "r", job="a")
    first.put_many([(keys[0], req, completion("old"))])
    second = RequestCache(tmp_path / "r", job="b")
    second.put_many(
        [(keys[0], req, completion("dup")), (keys[1], req, completion("1")), (keys[2], req, completion("2"))]
    )
    found = RequestCache(tmp_path / "r", job="c").get_many(keys)
    assert {k: c.text for k, c in found.items()} == {keys[0]: "old", keys[1]: "1", keys[2]: "2"}
