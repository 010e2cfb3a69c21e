"""Shared parts of benchmarks/reliability.py: throw-away checkouts of the repository, Snakemake
runs in them, the comparable content of a finished run, and the processes of a running one.

Every checkout copies the tracked sources (Snakefile, config, workflow, profiles, src) into a
scratch directory and runs with PYTHONPATH at that copy, like tests/workflow/conftest.py.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MIRROR = os.environ.get("RETRACE_MIRROR", str(REPO.parent / "shared" / "data"))
PY = sys.executable
SNAKEMAKE = str(Path(PY).with_name("snakemake"))
COPY = ("Snakefile", "config", "workflow", "profiles", "src")
# The plumbing experiment, small: one problem per set, 8 tokens, deterministic engine mode (one
# slot, no KV reuse: outputs do not depend on what ran before, so reruns are comparable), one
# engine thread (llama.cpp's spinning threads crawl on an oversubscribed 2-core machine).
OVERRIDES = [
    "dataset.limit=1",
    "method.sampling.max_tokens=8",
    "backend.engine.deterministic=true",
    "backend.engine.n_threads=1",
]
# Fields that legitimately differ between two runs of the same requests, derived from the record
# types: what a run measures about itself (records.MEASURED: timings, request-cache and engine
# counts), so a field added there with its mark can never make two equal results differ
# (tests/unit/test_reliability_kit.py fails when a new unmarked one would). Besides those, a few
# names of the score and report files that summarise them or hash the records that hold them.
DERIVED = {
    "prov_sha256",  # the hash of a provenance record (which holds timings and hosts)
    "evidence",  # claims.csv: such hashes, ';'-joined
    "request_cache_hits",  # score JSON: how many completions had cache_hit
    "created",  # a timestamp
    "device",  # the engine's device, or "none: every request was served from the cache"
}


def volatile() -> set[str]:
    from retrace.engine.llm import Usage
    from retrace.util.records import Completion, measured_fields

    return measured_fields(Completion, Usage) | DERIVED


VOLATILE = volatile()


class Checkout:
    """One copy of the repository with its own results/ (and by default its own cache)."""

    def __init__(
        self,
        root: Path,
        experiment: str = "plumbing",
        cache: Path | None = None,
        overrides: list[str] | None = None,
    ):
        self.root = Path(root)
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        for name in COPY:
            src, dest = REPO / name, self.root / name
            if src.is_dir():
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copy2(src, dest)
        self.cache = Path(cache) if cache else self.root / "results/cache/requests"
        self.write_config(experiment, overrides if overrides is not None else OVERRIDES)

    @classmethod
    def existing(cls, root: Path) -> Checkout:
        """A handle on a checkout made before (nothing is copied or reset)."""
        co = cls.__new__(cls)
        co.root = Path(root)
        co.cache = Path(yaml.safe_load((co.root / "config/config.yaml").read_text())["request_cache"])
        return co

    def write_config(self, experiment: str, overrides: list[str], **extra) -> None:
        cfg = {
            "experiment": experiment,
            "mirror": MIRROR,
            "overrides": overrides,
            "estimate": False,
            "request_cache": str(self.cache),
            **extra,
        }
        (self.root / "config/config.yaml").write_text(yaml.safe_dump(cfg))

    @property
    def env(self) -> dict:
        return {
            **os.environ,
            "PYTHONPATH": str(self.root / "src"),
            "HF_HUB_OFFLINE": "1",
            "PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '')}",
        }

    def snakemake(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        return subprocess.run(
            [SNAKEMAKE, "--cores", "2", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str, log: str = "run.log") -> subprocess.Popen:
        """Snakemake in a session of its own (its pid is the session id of all its jobs)."""
        out = open(self.root / log, "ab")
        return subprocess.Popen(
            [SNAKEMAKE, "--cores", "2", *args],
            cwd=self.root,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def retrace(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PY, "-m", "retrace", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def locked(self) -> bool:
        locks = self.root / ".snakemake/locks"
        return locks.is_dir() and any(locks.iterdir())

    def finish(self) -> subprocess.CompletedProcess:
        """Unlock if a killed run left its lock, then run to the end."""
        if self.locked():
            self.snakemake("--unlock")
        return self.snakemake()


def run_jobs(session: int) -> list[tuple[int, str]]:
    """(pid, stage) of each `python -m retrace <stage>` process in a Snakemake session."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if b"retrace" not in argv or b"-m" not in argv or os.getsid(int(d.name)) != session:
                continue
        except (OSError, ProcessLookupError):
            continue
        i = argv.index(b"retrace")
        if i > 0 and argv[i - 1] == b"-m" and b"python" in Path(argv[0].decode()).name.encode():
            found.append((int(d.name), argv[i + 1].decode() if len(argv) > i + 1 else "?"))
    return found


def kill_session(proc: subprocess.Popen) -> None:
    """kill -9 Snakemake, then whatever of its session is left (as when its node dies)."""
    os.kill(proc.pid, signal.SIGKILL)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def wait(proc: subprocess.Popen, seconds: float) -> bool:
    """Whether `proc` ended within `seconds`."""
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def outcome(root: Path, only: set[str] | None = None) -> dict[str, bytes]:
    """The comparable content of a finished run: data, generations, scores, results and claims
    tables, canonicalised with the VOLATILE fields removed. `only`: those relative paths."""
    res, out = Path(root) / "results", {}
    for pattern in (
        "data/*.jsonl",
        "generations/**/*.jsonl",
        "scores/**/*.json",
        "report/results.csv",
        "report/claims.csv",
    ):
        for path in sorted(res.glob(pattern)):
            rel = str(path.relative_to(res))
            if rel.endswith(".prov.json"):  # records hold timings and hosts: compared by audit
                continue
            if only is None or rel in only:
                out[rel] = _canonical(path)
    return out


def _canonical(path: Path) -> bytes:
    if path.suffix == ".csv":
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        return json.dumps([_scrub(r) for r in rows], sort_keys=True).encode()
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return json.dumps([_scrub(r) for r in rows], sort_keys=True).encode()
    return json.dumps(_scrub(json.loads(path.read_text())), sort_keys=True).encode()


def _scrub(obj):
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


def differences(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def timed(fn, *args, **kw):
    start = time.monotonic()
    return fn(*args, **kw), time.monotonic() - start


def flip_byte(path: Path, at: float = 0.5) -> int:
    """XOR one byte (at that fraction of the file) with 1; calling it again restores the file."""
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i] ^= 0x01
    path.write_bytes(bytes(data))
    return i
