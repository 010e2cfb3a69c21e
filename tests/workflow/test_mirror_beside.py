"""A finished run whose data are bundled stays finished whether a benchmark mirror is there or not
(issue 57): a user who finishes the default run from a clone alone, then puts the mirror beside
it (../shared/data, docs/guides/data.md) to try a larger experiment, reruns nothing; nor does a
copy of the run opened on a machine with, or without, a mirror.

    .venv/bin/python -m pytest -q -m slow tests/workflow/test_mirror_beside.py
"""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from tests import prerequisites
from tests.workflow.conftest import SNAKEMAKE, env_for, relocated


def dry_run(root, mirror: str | None) -> str:
    env = {k: v for k, v in env_for(root).items() if k != "RETRACE_MIRROR"}
    env |= {"RETRACE_MIRROR": mirror} if mirror else {}
    proc = subprocess.run(
        [SNAKEMAKE, "--cores", "2", "-n"], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_finished_bundled_run_plans_nothing_without_a_mirror_or_with_one_placed_beside(pipeline, tmp_path):
    copy = relocated(pipeline, tmp_path / "laptop" / "retrace")  # nothing beside it
    config = copy / "config" / "config.yaml"
    cfg = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**cfg, "mirror": None}))  # found as a user's clone finds it
    assert not (copy.parent / "shared").exists()
    assert "Nothing to be done" in dry_run(copy, None)[-3000:]
    beside = copy.parent / "shared" / "data"  # then the mirror, beside the clone
    if prerequisites.MIRROR and os.path.isdir(prerequisites.MIRROR):
        beside.parent.mkdir()
        beside.symlink_to(os.path.abspath(prerequisites.MIRROR))
    else:
        beside.mkdir(parents=True)
        (beside / "MANIFEST.sha256").write_text("0  ./gsm8k/test.jsonl\n")
    assert "Nothing to be done" in dry_run(copy, None)[-3000:]
    assert "Nothing to be done" in dry_run(copy, str(beside))[-3000:]  # or named by $RETRACE_MIRROR
