"""Read a finished run: its provenance records, artifacts, sources and workflow files.

Every `X.prov.json` under the results directory is one job. What is copied into the crate:
every record, the artifacts they describe (and their by-products) except generations (unless
asked for), the request cache, anything larger than MAX_INCLUDED_BYTES and, past a total of
MAX_TOTAL_BYTES, the largest; those are referenced by sha256 only (model weights are never
artifacts: the model manifest names their sha256 and source). Inputs that are not artifacts (bundled data, prompt templates,
model weights, mirror files) are copied only when they lie inside the checkout, are small and
still have the bytes the run hashed; otherwise they too are referenced by checksum.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from retrace.util.hashing import hash_sources, sha256_file

MAX_INCLUDED_BYTES = 20 * 1024 * 1024  # one file larger than this is referenced, not copied
MAX_TOTAL_BYTES = 40 * 1024 * 1024  # copied artifacts in all: the crate stays under 50 MB
REFERENCED_DIRS = ("cache",)  # the request cache: by the hash of its listing only
GENERATIONS_DIR = "generations"
WORKFLOW_GLOBS = (
    "Snakefile",
    "workflow/rules/*.smk",
    "workflow/schemas/*",
    "workflow/report/*",
    "config/**/*.yaml",
    "envs/*.txt",
    "profiles/**/*.yaml",
    "pyproject.toml",
)
CHECKOUT = Path(__file__).resolve().parents[3]


@dataclass
class Job:
    """One provenance record and what the crate does with its artifact."""

    record_path: str  # crate-relative, e.g. results/data/x.jsonl.prov.json
    record: dict
    record_sha256: str
    artifact: str  # crate-relative path of the artifact
    included: bool  # artifact bytes copied into the crate


@dataclass
class Run:
    results: Path
    root: Path  # the directory the run's relative paths are relative to
    jobs: list[Job] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)  # crate path -> source on disk
    sources: dict[str, dict] = field(default_factory=dict)  # non-artifact input path -> info
    code: dict[str, list[str]] = field(default_factory=dict)  # sources_hash -> files (verified)
    candidates: dict[str, tuple[Path, int]] = field(default_factory=dict)  # artifacts to copy


def crate_path(path: str) -> str:
    """A recorded relative path as a crate path; refuses paths that leave the crate."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts:
        raise ValueError(f"{path}: not a path inside the run")
    return str(p)


def _excluded(rel: str, results_name: str, generations: bool, size: int) -> bool:
    parts = PurePosixPath(rel).parts
    sub = parts[1] if len(parts) > 1 and parts[0] == results_name else ""
    return sub in REFERENCED_DIRS or (sub == GENERATIONS_DIR and not generations) or size > MAX_INCLUDED_BYTES


def collect(results: Path, include_generations: bool = False) -> Run:
    """Every record under `results`, with the decision include/reference for each file."""
    results = Path(results)
    if not results.is_dir():
        raise FileNotFoundError(f"{results}: no results directory (run the workflow first)")
    run = Run(results, results.resolve().parent)
    for pp in sorted(results.rglob("*.prov.json")):
        run.jobs.append(_job(run, pp, include_generations))
    if not run.jobs:
        raise ValueError(f"{results}: no provenance records (*.prov.json) found")
    _fit_budget(run, None if include_generations else MAX_TOTAL_BYTES)  # asked for: all of them
    for job in run.jobs:
        _add_sources(run, job.record)
    _add_workflow(run)
    return run


def _job(run: Run, pp: Path, generations: bool) -> Job:
    try:
        rec = json.loads(pp.read_text())
        art = crate_path(rec["artifact"]["path"])
    except (ValueError, KeyError) as e:
        raise ValueError(f"{pp}: not a readable provenance record ({e})") from e
    rel_record = f"{art}.prov.json"  # a record lives beside its artifact
    disk = run.root / art
    if not disk.is_file():
        raise FileNotFoundError(f"{pp}: its artifact {art} is missing")
    if sha256_file(disk) != rec["artifact"]["sha256"]:
        raise ValueError(f"{art}: bytes changed since {pp} was written (run `retrace audit {art}`)")
    run.files[rel_record] = pp
    for path in [art] + [crate_path(c["path"]) for c in rec.get("companions", [])]:
        size = (run.root / path).stat().st_size
        if not _excluded(path, run.results.name, generations, size):
            run.candidates[path] = (run.root / path, size)
    return Job(rel_record, rec, sha256_file(pp), art, False)


def _fit_budget(run: Run, budget: int | None) -> None:
    """Copy the smallest artifacts first while the total stays under `budget` bytes; the
    rest are referenced by checksum like the generations."""
    total = 0
    for path, (disk, size) in sorted(run.candidates.items(), key=lambda kv: (kv[1][1], kv[0])):
        if budget is not None and total + size > budget:
            break
        total += size
        run.files[path] = disk
    for job in run.jobs:
        job.included = job.artifact in run.files


def _add_sources(run: Run, rec: dict) -> None:
    """Inputs without a record, and the code files behind the record's sources_hash."""
    for inp in rec.get("inputs", []):
        if "prov" in inp or inp["path"] in run.sources:
            continue
        info = {"sha256": inp["sha256"], "crate_path": None}
        disk = Path(inp["path"]) if Path(inp["path"]).is_absolute() else run.root / inp["path"]
        rel = _inside_checkout(disk)
        if (
            rel
            and not rel.startswith(f"{run.results.name}/")
            and disk.is_file()
            and disk.stat().st_size <= MAX_INCLUDED_BYTES
            and sha256_file(disk) == inp["sha256"]
        ):
            info["crate_path"] = rel
            run.files[rel] = disk
        run.sources[inp["path"]] = info
    code = rec.get("code", {})
    files = [(run.root / s).resolve() for s in code.get("sources", [])]  # relative to the run's cwd
    rels = [r for f in files if (r := _inside_checkout(f))]
    if (
        code.get("sources_hash")
        and files
        and len(rels) == len(files)
        and all(f.is_file() for f in files)
        and hash_sources(files) == code["sources_hash"]
    ):
        run.code[code["sources_hash"]] = sorted(rels)
        run.files.update(zip(rels, files))
    else:  # the checkout changed since the run: the tool is identified by its hash only
        run.code.setdefault(code.get("sources_hash", ""), [])


def _inside_checkout(path: Path) -> str | None:
    try:
        return crate_path(str(path.resolve().relative_to(CHECKOUT)))
    except ValueError:
        return None


def _add_workflow(run: Run) -> None:
    for pattern in WORKFLOW_GLOBS:
        for f in sorted(CHECKOUT.glob(pattern)):
            if f.is_file():
                run.files[str(f.relative_to(CHECKOUT))] = f
