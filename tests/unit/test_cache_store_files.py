"""The request cache's files below RequestCache (retrace.store.cache_store, cache_index): index lines,
segment rollover and file modes, each from what a reader of the files must see (the sharded
index, its locks and torn logs: tests/unit/test_cache.py, test_cache_cluster.py).

    .venv/bin/python -m pytest -q tests/unit/test_cache_store_files.py
"""

from __future__ import annotations

import os

import pytest

from retrace.store import cache_store
from retrace.store.cache_index import Index, _parse
from retrace.store.cache_store import Segments


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
def test_a_line_that_is_not_an_index_line_is_never_an_entry(line):
    assert _parse(line) is None
    assert _parse("good\tw-0.seg\t0\t3") == ("good", "w-0.seg", 0, 3)


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
