"""Bad input: a request cache on a full or read-only disk, through `retrace generate` (the
simulated engine, one cache commit per 2 requests). The job ends in one line naming the cache
folder (exit 2), its output is not written, every batch committed before stays in the cache,
and a rerun once there is room serves them and writes what an undisturbed run writes.

    .venv/bin/python -m pytest -q tests/unit/test_cache_bad_disk.py
    sudo .venv/bin/python -m pytest -q -m root tests/unit/test_cache_bad_disk.py   # a real full tmpfs
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import subprocess

import pytest

from retrace.cli import main
from retrace.planning.plan import Job
from retrace.store.cache import RequestCache
from retrace.store.data import write_problems
from retrace.util.records import Problem

BATCH = 2
JOB = Job(
    "smollm2-135m-q41",
    "simulated",
    "math500",
    "majority",
    "majority",
    0,
    ("method.n=3", f"backend.engine.batch_size={BATCH}", "method.sampling.max_tokens=4096"),
)


@pytest.fixture
def job(tmp_path):
    """(arguments of `retrace generate` but --cache/--out, the problems' folder)."""
    data = tmp_path / "problems.jsonl"
    write_problems(
        data, [Problem(id=f"q{i}", question=f"What is {i} + 1?", gold=str(i + 1)) for i in range(8)]
    )
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"name": JOB.model, "fingerprint": "f" * 64, "params": 135_000_000}))
    args = [
        "generate",
        *JOB.cli_args().replace("'", "").split(),
        "--data",
        str(data),
        "--manifest",
        str(manifest),
    ]
    return args


def generate(args, cache, out) -> int:
    return main([*args, "--cache", str(cache), "--out", str(out)])


def rows(path):
    """The samples' texts and tokens (what a rerun must reproduce; cache_hit and latency differ)."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out.append([(s["text"], s["generated_tokens"]) for s in row["samples"]])
    return out


def the_line(err: str) -> str:
    [line] = [x for x in err.splitlines() if x.startswith("retrace generate: ")]
    return line


def fill_after(monkeypatch, cache, commits: int) -> None:
    """A disk that fills after `commits` cache commits: the next segment write stops part-way
    with ENOSPC, as a full filesystem's does."""
    real, seen = os.write, {"n": 0}

    def write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(cache / "segments")):
            seen["n"] += 1
            if seen["n"] > commits:
                real(fd, bytes(data[:7]))
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_a_cache_on_a_disk_that_fills_mid_job_is_one_line_and_keeps_every_commit(
    job, tmp_path, monkeypatch, capsys
):
    cache, out = tmp_path / "cache", tmp_path / "gen.jsonl"
    fill_after(monkeypatch, cache, commits=3)
    assert generate(job, cache, out) == 2
    line = the_line(capsys.readouterr().err)
    assert f"request cache {cache} cannot be written (No space left on device" in line
    assert "requests finished before are kept" in line and not out.exists()
    assert RequestCache(cache).count() == 3 * BATCH  # the three commits before the disk filled
    monkeypatch.undo()  # room again: the rerun serves them and goes on
    assert generate(job, cache, out) == 0
    assert len(RequestCache(cache).hits()) == 3 * BATCH
    assert generate(job, tmp_path / "undisturbed", tmp_path / "undisturbed.jsonl") == 0
    assert rows(out) == rows(tmp_path / "undisturbed.jsonl")


def read_only(monkeypatch, cache) -> None:
    """The cache folder refuses every write as a read-only mount does (root ignores chmod)."""
    real_os, real_io = os.open, io.open

    def refuse(path):
        if str(path).startswith(str(cache)):
            raise OSError(errno.EROFS, "Read-only file system", str(path))

    def os_open(path, flags, *a, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os(path, flags, *a, **kw)

    def io_open(path, mode="r", *a, **kw):
        if set(mode) & set("wax+"):
            refuse(path)
        return real_io(path, mode, *a, **kw)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", io_open)


def test_a_read_only_cache_serves_what_it_holds_and_new_requests_are_one_line(
    job, tmp_path, monkeypatch, capsys
):
    cache, out = tmp_path / "cache", tmp_path / "gen.jsonl"
    assert generate(job, cache, out) == 0
    finished = RequestCache(cache).count()
    read_only(monkeypatch, cache)
    # every request finished: the job runs (its hit records are left out, with a warning)
    assert generate(job, cache, tmp_path / "again.jsonl") == 0
    assert rows(tmp_path / "again.jsonl") == rows(out)
    more = [*job, "--override", "method.n=4"]  # a 4th sample a problem: new requests
    assert generate(more, cache, tmp_path / "more.jsonl") == 2
    line = the_line(capsys.readouterr().err)
    assert f"request cache {cache} cannot be written (Read-only file system" in line
    assert not (tmp_path / "more.jsonl").exists()
    monkeypatch.undo()
    assert RequestCache(cache).count() == finished


@pytest.mark.skipif(os.geteuid() == 0, reason="[NOT_ROOT] root writes into read-only folders")
def test_a_cache_folder_made_read_only_by_its_mode_is_one_line_too(job, tmp_path, capsys):
    cache, out = tmp_path / "cache", tmp_path / "gen.jsonl"
    assert generate(job, cache, out) == 0
    folders = [cache, *(p for p in cache.rglob("*") if p.is_dir())]
    for p in folders:
        p.chmod(0o555)
    try:
        assert generate(job, cache, tmp_path / "again.jsonl") == 0
        assert generate([*job, "--override", "method.n=4"], cache, tmp_path / "more.jsonl") == 2
        line = the_line(capsys.readouterr().err)
        assert f"request cache {cache} cannot be written (Permission denied" in line
    finally:
        for p in folders:
            p.chmod(0o755)


@pytest.mark.root
@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/bin/mount"), reason="[ROOT] needs root to mount a tmpfs"
)
def test_a_cache_on_a_real_full_tmpfs(job, tmp_path, capsys):
    mnt, out = tmp_path / "mnt", tmp_path / "gen.jsonl"
    assert generate(job, tmp_path / "whole", tmp_path / "whole.jsonl") == 0
    whole = sum(4096 * -(-p.stat().st_size // 4096) for p in (tmp_path / "whole").rglob("*") if p.is_file())
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)]).returncode:
        pytest.skip("[ROOT] mount refused")
    try:
        (mnt / "filler").write_bytes(b"\0" * (4 * 2**20 - whole // 2))  # room for part of the job
        assert generate(job, mnt / "cache", out) == 2
        line = the_line(capsys.readouterr().err)
        assert f"request cache {mnt / 'cache'} cannot be written (No space left on device" in line
        kept = RequestCache(mnt / "cache").count()
        assert 0 < kept < 24  # part of the job was committed before the disk filled
        (mnt / "filler").unlink()
        assert generate(job, mnt / "cache", out) == 0
        assert len(RequestCache(mnt / "cache").hits()) == kept
    finally:
        subprocess.run(["umount", str(mnt)])
