"""retrace.util.atomic: an artifact is written whole under its name or not at all."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from retrace.util.atomic import atomic_open, write_json, write_jsonl


def test_a_failed_block_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    write_json(path, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic_open(path) as f:
            f.write('{"v": 2')
            raise RuntimeError("killed mid-write")
    assert path.read_text() == '{\n  "v": 1\n}\n'
    assert os.listdir(tmp_path) == ["a.json"]


def test_a_full_disk_names_the_artifact_and_leaves_nothing(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the data reaches the disk at fsync: it fails there
    out = tmp_path / "gen" / "rows.jsonl"
    with pytest.raises(OSError, match=r"No space left on device: .*rows.jsonl was not written") as e:
        write_jsonl(out, [{"a": 1}])
    assert e.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / "gen") == []


@pytest.mark.root
@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/bin/mount"), reason="[ROOT] needs root to mount a tmpfs"
)
def test_a_real_full_tmpfs(tmp_path):
    import subprocess

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("[ROOT] mount refused")
    try:
        (mnt / "filler").write_bytes(b"\0" * 8192)
        with pytest.raises(OSError, match="rows.jsonl was not written"):
            write_jsonl(mnt / "rows.jsonl", ({"text": "x" * 100} for _ in range(200)))
        assert sorted(os.listdir(mnt)) == ["filler"]
    finally:
        subprocess.run(["umount", str(mnt)])


def test_a_published_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    # a default run's report and data came out 0600: nobody else in the group could read them
    old = os.umask(0o027)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o640
    write_json(tmp_path / "b.json", {"x": 1})
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o666 & ~old
