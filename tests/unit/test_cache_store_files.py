"""The request cache's files (retrace.cache_store), below RequestCache: index lines, torn tails,
segment rollover, the lock and file modes, each from what a reader of the files must see.

    .venv/bin/python -m pytest -q tests/unit/test_cache_store_files.py
"""

from __future__ import annotations

import os
import time

import pytest

from retrace import cache_store
from retrace.cache_store import Index, Segments


def test_handles_create_their_folders_with_parents(tmp_path):
    Index(tmp_path / "a" / "b" / "index")
    Segments(tmp_path / "c" / "d" / "segments", "w")
    assert (tmp_path / "a/b/index").is_dir() and (tmp_path / "c/d/segments").is_dir()


@pytest.mark.parametrize(
    "line",
    [
        "k\tw-0.seg\tx\t5",  # offset not a number
        "k\tw-0.seg\t5\tx",  # length not a number
        "k\tw-0.seg\t0\t5\textra",  # five fields
        "k\tw-0.seg\t0",  # a write cut short
    ],
)
def test_a_line_that_is_not_an_index_line_is_never_an_entry(tmp_path, line):
    index = Index(tmp_path)
    index.shard("0").write_text(f"{line}\ngood\tw-0.seg\t0\t3\n")
    index.refresh(["0"])
    assert index.entries == {"good": ("w-0.seg", 0, 3)}


def test_an_append_cuts_a_torn_last_line_first(tmp_path):
    index = Index(tmp_path)
    index.shard("0").write_text("a\tw-0.seg\t0\t5\nb\tw-0.s")  # the writer was killed mid-line
    index.append({"0": ["c\tw-0.seg\t5\t5"]})
    assert index.shard("0").read_text() == "a\tw-0.seg\t0\t5\nc\tw-0.seg\t5\t5\n"
    index.append({"0": ["d\tw-0.seg\t10\t5"]})  # a whole last line is kept
    assert index.shard("0").read_text().splitlines()[-2:] == ["c\tw-0.seg\t5\t5", "d\tw-0.seg\t10\t5"]


def test_segments_start_at_zero_and_roll_over_when_full(tmp_path, monkeypatch):
    segments = Segments(tmp_path, "w")
    [(first, offset, length)] = segments.append([b"12345"])
    assert (first, offset, length) == ("w-0.seg", 0, 5)
    monkeypatch.setattr(cache_store, "SEGMENT_BYTES", 10)
    assert segments.append([b"67890"]) == [("w-0.seg", 5, 5)]  # 5 bytes < 10: same segment
    assert segments.append([b"abc", b"de"]) == [("w-1.seg", 0, 3), ("w-1.seg", 3, 2)]  # full at 10
    assert segments.read("w-0.seg", 5, 5) == b"67890" and segments.read("w-1.seg", 3, 2) == b"de"


def test_segments_are_as_readable_as_the_umask_allows(tmp_path):
    old = os.umask(0o002)  # a group sharing the cache
    try:
        segments = Segments(tmp_path, "w")
        segments.append([b"x"])
    finally:
        os.umask(old)
    assert (tmp_path / "w-0.seg").stat().st_mode & 0o777 == 0o664


def test_the_lock_is_held_inside_and_a_stale_one_is_broken(tmp_path):
    index = Index(tmp_path)
    with index.locked():
        assert (tmp_path / ".lock").is_dir()
    assert not (tmp_path / ".lock").exists()
    (tmp_path / ".lock").mkdir()  # left by a killed holder long ago
    old = time.time() - 2 * cache_store.STALE_LOCK_S
    os.utime(tmp_path / ".lock", (old, old))
    with index.locked():
        assert (tmp_path / ".lock").is_dir()
        assert (tmp_path / ".lock").stat().st_mtime > old  # ours, not the stale one
    assert not (tmp_path / ".lock").exists()


def test_a_live_holders_lock_is_waited_for_not_broken(tmp_path, monkeypatch):
    """A fresh lock belongs to a running writer: the next one waits (its first sleep ends this
    test) and leaves the lock where it is."""

    class Waited(Exception):
        pass

    def sleep(_s):
        raise Waited

    index = Index(tmp_path)
    (tmp_path / ".lock").mkdir()  # held just now by another writer
    monkeypatch.setattr(cache_store.time, "sleep", sleep)
    with pytest.raises(Waited), index.locked():
        pass
    assert (tmp_path / ".lock").is_dir()
