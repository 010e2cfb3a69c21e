"""profiles/slurm/serve.sbatch, run by bash with a stand-in Python: what an array task runs.

Every array task starts one server and nothing else: no task runs Snakemake (tasks starting
together would contend for its lock on .snakemake/, and the user's own Snakemake holds it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SBATCH = Path(__file__).resolve().parents[2] / "profiles" / "slurm" / "serve.sbatch"


def run_task(tmp_path: Path, task: int, manifest: bool = True) -> subprocess.CompletedProcess:
    """serve.sbatch as array task `task` in `tmp_path`, with python and snakemake stand-ins
    that append their arguments to calls.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "snakemake"):
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {tmp_path}/calls.log\n')
        stub.chmod(0o755)
    if manifest:
        (tmp_path / "results/models/m").mkdir(parents=True, exist_ok=True)
        (tmp_path / "results/models/m/manifest.json").write_text("{}")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "MODEL": "m",
        "RETRACE_SERVE_KEY": "k",
        "SLURM_ARRAY_TASK_ID": str(task),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    return subprocess.run(["bash", str(SBATCH)], cwd=tmp_path, env=env, capture_output=True, text=True)


def test_each_array_task_starts_one_server_and_never_snakemake(tmp_path):
    for task in (0, 1):
        assert run_task(tmp_path, task).returncode == 0
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 2 and not any(c.startswith("snakemake") for c in calls), calls
    assert all(c.startswith("python -m retrace serve --model m --backend vllm") for c in calls)
    assert (
        "--endpoint results/serve/m/gpu1.json" in calls[1] and "--api-key-env RETRACE_SERVE_KEY" in calls[1]
    )


def test_a_task_without_the_manifest_says_how_to_make_it_once(tmp_path):
    done = run_task(tmp_path, 0, manifest=False)
    assert done.returncode == 2 and not (tmp_path / "calls.log").exists()
    line = done.stderr.strip()
    assert "\n" not in line and "snakemake --cores 1 results/models/m/manifest.json" in line, line
