"""Reading and publishing a run: `retrace status`, `retrace audit`, `retrace export`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from retrace.commands import command


@command(
    "status",
    "progress of running jobs, read from their logs",
    ("retrace status", "retrace status --logs results/logs/generate --stale-after 120"),
)
def _status(p: argparse.ArgumentParser) -> Callable:
    p.add_argument(
        "--logs", type=Path, default=Path("results/logs"), help="log directory (searched recursively)"
    )
    p.add_argument(
        "--stale-after",
        type=float,
        default=600.0,
        help="seconds without a new log line after which a job is shown as stale",
    )

    def run(a: argparse.Namespace) -> None:
        from retrace.util.progress import format_status, status

        print(format_status(status(a.logs, a.stale_after)))

    return run


@command(
    "audit",
    "verify an artifact's lineage back to its sources",
    (
        "retrace audit results/report/results.csv   # the report's whole lineage",
        "retrace audit --quiet results/report/results.csv   # only failures and a count",
        "retrace audit --crate run.crate.zip        # an exported run, offline",
    ),
)
def _audit_command(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("paths", type=Path, nargs="*")
    p.add_argument("--quiet", action="store_true", help="print only the failing artifacts and a count")
    p.add_argument(
        "--crate", type=Path, default=None, help="verify an exported crate (.zip or folder) instead, offline"
    )

    def run(a: argparse.Namespace) -> int:
        if a.crate is not None and a.paths:
            p.error("give artifact paths or --crate CRATE, not both")
        if a.crate is not None:
            return audit_crate(a.crate)
        if not a.paths:
            p.error("give artifact paths or --crate CRATE")
        return audit(a.paths, a.quiet)

    return run


def audit(paths: list[Path], quiet: bool) -> int:
    """Each path's lineage tree; with `quiet`, only the failing artifacts and a count."""
    from retrace.store.provenance import audit, audit_results_table

    ok, checked, failed = True, set[str](), dict[str, list[str]]()
    for path in paths:
        node = audit(path)
        problems = audit_results_table(path) if path.suffix == ".csv" and node.ok else []
        ok = ok and node.all_ok() and not problems
        checked |= {n.path for n in node.walk()}
        failed |= {n.path: n.problems for n in node.walk() if n.problems}
        if not quiet:
            print("\n".join(node.lines()))
        elif problems:
            failed[str(path)] = failed.get(str(path), []) + problems
        for line in problems if not quiet else []:
            print(f"! {line}")
    if quiet:
        for where, why in failed.items():
            print(f"[BAD] {where}" + "".join(f"\n      ! {p}" for p in why))
    count = f" ({len(failed)} of {len(checked)} artifacts failed)" if quiet and not ok else ""
    print("audit: OK" if ok else f"audit: FAILED{count}")
    return 0 if ok else 1


def audit_crate(crate: Path) -> int:
    """Verify an exported crate offline (retrace.export.verify)."""
    from retrace.export.verify import verify

    problems = verify(crate)
    for line in problems:
        print(f"! {line}")
    print(f"audit --crate {crate}: " + ("OK" if not problems else f"FAILED ({len(problems)} problems)"))
    return 0 if not problems else 1


@command(
    "export",
    "package a finished run as a Provenance Run Crate (zip)",
    (
        "retrace export --out run.crate.zip",
        "retrace export --out run.crate.zip --include-generations --agent 'A. Researcher'",
    ),
)
def _export_command(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--include-generations",
        action="store_true",
        help="copy the generations too (else referenced by checksum)",
    )
    p.add_argument("--agent", default=None, help="who ran it (Person name; default: the user)")
    return lambda a: export(a.results, a.out, a.include_generations, a.agent)


def export(results: Path, out: Path, generations: bool, agent: str | None) -> int:
    """Write the crate; a missing run or a changed artifact is one line and exit 1."""
    from retrace.export.crate import export

    try:
        path = export(results, out, generations, agent)
    except (FileNotFoundError, ValueError) as e:  # no run, or a changed artifact: say which
        print(f"retrace export: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); verify: retrace audit --crate {path}")
    return 0
