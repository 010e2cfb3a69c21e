"""Workflow tests: the real Snakefile on a copy of the repository, with a real small model.

Each test copies the tracked files (plus src/) into a temporary directory and runs
Snakemake there with PYTHONPATH pointing at the copy, so tests may edit templates and
sources without touching the checkout. The model is SmolLM2-135M (experiment `plumbing`).

The finished runs are session fixtures, one per experiment (`pipeline`, `refined`, `drr_run`,
`art_run`): a full workflow costs minutes, so every test that asserts on an experiment shares
its one run. Add a test as a new file that takes the fixture; a test that edits the copy
restores what it edited, mtime included (`edited`), so the run stays finished for the next.
Only `pipeline` runs the `probe` stage (its test checks what an engine edit reruns); the
others set `probe: false`. Each run's Snakemake benchmark table (seconds per job) is printed
in the terminal summary, so a slow stage shows up in CI's log.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import prerequisites
from tests.workflow.experiments import ONE_THREAD

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


def write_config(
    root: Path, experiment: str = "plumbing", overrides: list[str] | None = None, probe: bool = False
) -> Path:
    """config/config.yaml of a copy; the raw-rate probe is off unless a test needs it."""
    import yaml

    cfg = {"experiment": experiment, "mirror": MIRROR, "overrides": overrides or [], "probe": probe}
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
    """Files a dry-run would (re)create, relative to the results directory; a planned output
    folder (a cell's scores or diagnostics, workflow/rules/score.smk) counts as the files it holds."""
    out = snakemake(root, "-n").stdout
    files = set()
    for m in re.finditer(r"^\s+output: (.+)$", out, re.M):
        for f in (f.strip() for f in m.group(1).split(",")):
            if (root / f).is_dir():
                files.update(str(p.relative_to(root)) for p in (root / f).glob("[!.]*"))
            else:
                files.add(f)
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


@contextlib.contextmanager
def edited(path: Path, edit):
    """Rewrite a file of a copy with edit(text) for the block; restore text and mtime after."""
    text, st = path.read_text(), path.stat()
    path.write_text(edit(text))
    try:
        yield path
    finally:
        path.write_text(text)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def relocated(run: Path, dest: Path, how: str = "cp") -> Path:
    """A finished run copied as a user copies one: `cp -a`, or a tar archive unpacked elsewhere;
    a venv inside the run is not copied but linked back to the original's (a venv cannot move)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if how == "tar":
        archive = dest.parent / f"{dest.name}.tar"
        subprocess.run(["tar", "-C", str(run), "--exclude", "./.venv", "-cf", str(archive), "."], check=True)
        dest.mkdir()
        subprocess.run(["tar", "-C", str(dest), "-xf", str(archive)], check=True)
        archive.unlink()
    else:
        subprocess.run(["cp", "-a", str(run), str(dest)], check=True)
    if (run / ".venv").exists():
        shutil.rmtree(dest / ".venv", ignore_errors=True)
        (dest / ".venv").symlink_to(run / ".venv")
    return dest


def assert_relocatable(run: Path, dest: Path, targets: list[str], how: str = "cp") -> None:
    """The copy is finished ("Nothing to be done") and `retrace audit` of it reads the copy's own
    files: every path it prints is inside the copy, none inside the original."""
    copy = relocated(run, dest, how)
    proc = snakemake(copy, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    audit = retrace(copy, "audit", *targets)
    assert audit.returncode == 0 and "audit: OK" in audit.stdout, audit.stdout[-3000:]
    assert str(copy) in audit.stdout and f"{run}/" not in audit.stdout, audit.stdout[-3000:]


def record_benchmarks(name: str, root: Path) -> None:
    """Keep the run's Snakemake benchmark table (results/benchmarks/**/*.tsv, one job each) for
    the terminal summary (tests/conftest.py), in the folder RETRACE_TEST_BENCH_DIR names: under
    pytest-xdist the run may happen in a worker, whose memory the summary cannot read."""
    rows = []
    for tsv in sorted((root / "results" / "benchmarks").rglob("*.tsv")):
        for row in csv.DictReader(tsv.open(), delimiter="\t"):
            job = str(tsv.relative_to(root / "results" / "benchmarks"))
            rows.append((job, float(row["s"]), float(row.get("cpu_time") or "nan")))
    folder = os.environ.get("RETRACE_TEST_BENCH_DIR")
    if folder:
        (Path(folder) / f"{name}.json").write_text(json.dumps(rows))


def finished_run(
    tmp_path_factory, name: str, experiment: str, overrides=(), timeout=900, probe=False, setup=None
):
    """Copy the repository, configure `experiment`, let setup(root) edit the copy, run it all."""
    root = copy_repo(tmp_path_factory.mktemp(name))
    write_config(root, experiment=experiment, overrides=[ONE_THREAD, *overrides], probe=probe)
    if setup:
        setup(root)
    snakemake(root, timeout=timeout)
    record_benchmarks(name, root)
    return root


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory) -> Path:
    """A finished plumbing run (SmolLM2 on 4 problems of each bundled set), probe included."""
    return finished_run(tmp_path_factory, "pipeline", "plumbing", ["dataset.limit=4"], probe=True)


@pytest.fixture(scope="session")
def refined(tmp_path_factory) -> Path:
    """A finished refine_test run: every refinement baseline and falsifier, 3 seeds, 2 problems."""
    from tests.workflow.experiments import REFINE_TEST, write_experiment

    setup = lambda root: write_experiment(root, "refine_test", REFINE_TEST)
    return finished_run(tmp_path_factory, "refine", "refine_test", ["dataset.limit=2"], setup=setup)


@pytest.fixture(scope="session")
def drr_run(tmp_path_factory) -> Path:
    """A finished drr_test run: 10 of the 20 bundled questions (6 distil / 4 eval) and a maths spine."""
    from tests.workflow.experiments import DRR_TEST, write_experiment

    setup = lambda root: write_experiment(root, "drr_test", DRR_TEST)
    # ~3 min on an idle 2-core box; generous for a loaded one
    return finished_run(tmp_path_factory, "drr", "drr_test", ["dataset.limit=10"], timeout=2400, setup=setup)


@pytest.fixture(scope="session")
def art_run(tmp_path_factory) -> Path:
    """A finished art_plumbing run, its lookup tool reading a word list of the copy."""
    from tests.workflow.experiments import art_words, one_thread_art

    def setup(root: Path) -> None:
        art_words(root)
        one_thread_art(root)

    prerequisites.mirror()  # art_plumbing reads its two BIG-bench tasks whole from the mirror

    return finished_run(tmp_path_factory, "art", "art_plumbing", timeout=1500, setup=setup)
