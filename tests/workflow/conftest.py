"""Workflow tests: the real Snakefile on a copy of the repository, with a real small model.

Each test copies the tracked files (plus src/) into a temporary directory and runs
Snakemake there with PYTHONPATH pointing at the copy, so tests may edit templates and
sources without touching the checkout. The model is SmolLM2-135M (experiment `plumbing`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MIRROR = os.environ.get("RETRACE_MIRROR", str(REPO.parent / "shared" / "data"))
COPY = ("Snakefile", "config", "workflow", "profiles", "src")
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def copy_repo(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def write_config(root: Path, experiment: str = "plumbing", overrides: list[str] | None = None) -> Path:
    import yaml

    cfg = {"experiment": experiment, "mirror": MIRROR, "overrides": overrides or []}
    (root / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return root / "config" / "config.yaml"


def env_for(root: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(root / "src"), "HF_HUB_OFFLINE": "1"}


# A guard against hangs, not a performance assertion: on a loaded machine (several runs
# sharing two cores) raise it, e.g. RETRACE_TEST_TIMEOUT_SCALE=4.
TIMEOUT_SCALE = float(os.environ.get("RETRACE_TEST_TIMEOUT_SCALE", "1"))


def snakemake(root: Path, *args: str, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [SNAKEMAKE, "--cores", "2", *args],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
        timeout=timeout * TIMEOUT_SCALE,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def planned_outputs(root: Path) -> set[str]:
    """Files a dry-run would (re)create, relative to the results directory."""
    out = snakemake(root, "-n").stdout
    files = set()
    for m in re.finditer(r"^\s+output: (.+)$", out, re.M):
        files.update(f.strip() for f in m.group(1).split(","))
    return {f.removeprefix("results/") for f in files if not f.endswith(".prov.json")}


def retrace(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "retrace", *args],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    """A finished plumbing run (SmolLM2 on 4 problems of each bundled set)."""
    root = copy_repo(tmp_path_factory.mktemp("pipeline"))
    write_config(root, overrides=["dataset.limit=4"])
    snakemake(root)
    return root
