"""Round trip on the real plumbing run (SmolLM2): `snakemake --cores 2 export`, then
`retrace audit --crate` in an empty directory passes, and fails once one byte is changed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.workflow.conftest import env_for, snakemake

pytestmark = pytest.mark.slow  # on the shared `pipeline` run (a real model)


def audit_crate(crate, cwd, root):
    return subprocess.run(
        [sys.executable, "-m", "retrace", "audit", "--crate", str(crate)],
        cwd=cwd,
        env=env_for(root),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_export_target_round_trip(pipeline, tmp_path):
    assert "run.crate.zip" not in snakemake(pipeline, "-n").stdout  # not part of `all`
    snakemake(pipeline, "export")
    crate = pipeline / "results" / "run.crate.zip"
    assert crate.stat().st_size < 50 * 1024 * 1024
    fresh = tmp_path / "reviewer"
    fresh.mkdir()
    shutil.copy(crate, fresh / "run.crate.zip")
    ok = audit_crate("run.crate.zip", fresh, pipeline)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK" in ok.stdout
    with zipfile.ZipFile(fresh / "run.crate.zip") as z:
        members = {n: z.read(n) for n in z.namelist()}
    score = next(
        n
        for n in members
        if n.startswith("results/scores/") and n.endswith(".json") and not n.endswith(".prov.json")
    )
    data = bytearray(members[score])
    data[len(data) // 2] ^= 0x01
    members[score] = bytes(data)
    with zipfile.ZipFile(fresh / "tampered.zip", "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    bad = audit_crate("tampered.zip", fresh, pipeline)
    assert bad.returncode == 1
    assert score in bad.stdout and "FAILED" in bad.stdout
