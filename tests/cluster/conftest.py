"""The live SLURM tests' shared fixture: a running single-node SLURM with accounting
(tests/cluster/slurm_up.sh), or a [SLURM] skip naming what is missing (a failure under
RETRACE_REQUIRE_SLURM=1, as in CI)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _slurm_problem() -> str | None:
    if not shutil.which("sbatch"):
        return "SLURM client tools are not installed (run tests/cluster/slurm_up.sh as root)"
    for cmd in (["sinfo", "-h", "-N", "-o", "%T"], ["sacct", "-n", "-X", "-S", "now-1minutes"]):
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=20)
        except (subprocess.SubprocessError, OSError) as e:
            return (
                f"`{' '.join(cmd)}` failed ({e}): no SLURM with accounting is running here "
                "(start one with tests/cluster/slurm_up.sh)"
            )
    return None


@pytest.fixture(scope="module")
def slurm():
    problem = _slurm_problem()
    if problem and os.environ.get("RETRACE_REQUIRE_SLURM") == "1":
        pytest.fail(problem)
    if problem:
        pytest.skip(f"[SLURM] {problem}")
