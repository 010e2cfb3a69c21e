"""Run a measuring command and keep what it printed as a dated result file.

    .venv/bin/python benchmarks/record.py NAME -- COMMAND [ARGS...]
    .venv/bin/python benchmarks/record.py calibrate -- .venv/bin/python benchmarks/claims_calibration.py

COMMAND's standard output is passed through unchanged; every line of the form `label: value`
becomes an entry of the result's `values` (the benchmarks here print their measurements so,
e.g. `null family false-supported rate (paper): 0.02`). When COMMAND exits 0 the result is
written to docs/measurements/results/NAME/<UTC time>.json with the command, its wall time, the
commit (and whether the tree was dirty) and the machine (cores, CPU model, memory, load before
and after, root or not). `make figures` renders the tables of README.md and docs/ from these
files (benchmarks/figures.py), so a published number is always one that a command wrote.
A failed command writes nothing (its exit code is returned) unless --keep-failed is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "measurements" / "results"
# `label: value`, the label free of further colons (so a URL or a clock time stays in the value).
VALUE_LINE = re.compile(r"^\s*([^:\n]{1,200}?):\s+(\S.*?)\s*$")
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def parse_values(lines: list[str]) -> dict[str, str]:
    """`label: value` lines as a dict (a label printed twice keeps its last value)."""
    values: dict[str, str] = {}
    for line in lines:
        m = VALUE_LINE.match(line)
        if m:
            values[m.group(1).strip()] = m.group(2)
    return values


def _git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def machine() -> dict[str, object]:
    """What the numbers were measured on: they vary ~3x with the machine and its load."""
    cpu = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in cpuinfo.read_text().splitlines()
                if ln.startswith("model name")
            ),
            "",
        )
    mem_kb = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        mem_kb = int(meminfo.read_text().split()[1])
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kb / 2**20, 1),
        "root": os.geteuid() == 0,
    }


def run(cmd: list[str]) -> tuple[int, list[str], float]:
    """COMMAND with its stdout echoed line by line and kept; its stderr passes through."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line.rstrip("\n"))
    return proc.wait(), lines, time.monotonic() - start


def result_record(
    name: str,
    cmd: list[str],
    rc: int,
    lines: list[str],
    wall: float,
    started: datetime,
    load: tuple[float, float],
    note: str,
) -> dict[str, object]:
    """The JSON a result file holds."""
    return {
        "name": name,
        "command": cmd,
        "note": note,
        "rc": rc,
        "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": round(wall, 1),
        "commit": _git("rev-parse", "--short=12", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": {**machine(), "load_before": load[0], "load_after": load[1]},
        "values": parse_values(lines),
    }


def write(record: dict[str, object], results: Path = RESULTS) -> Path:
    """docs/measurements/results/NAME/<started>.json, written whole or not at all; a second
    result started in the same second gets <started>-2.json (and so on), never overwriting."""
    folder = results / str(record["name"])
    folder.mkdir(parents=True, exist_ok=True)
    stem = str(record["started"]).replace(":", "")
    path, n = folder / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", help="result name: a folder under docs/measurements/results")
    p.add_argument(
        "--note", default="", help="what else the reader should know (e.g. 'beside a one-core burner')"
    )
    p.add_argument("--results", type=Path, default=RESULTS, help="where result folders go")
    p.add_argument("--keep-failed", action="store_true", help="write the result even if COMMAND fails")
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    a, cmd = p.parse_args(argv[:cut]), argv[cut + 1 :]
    if not NAME.match(a.name) or not cmd:
        p.error("usage: record.py [OPTIONS] NAME -- COMMAND (NAME: lower-case letters, digits, - and _)")
    started, load0 = datetime.now(UTC), os.getloadavg()[0]
    rc, lines, wall = run(cmd)
    if rc == 0 or a.keep_failed:
        record = result_record(a.name, cmd, rc, lines, wall, started, (load0, os.getloadavg()[0]), a.note)
        print(f"record: {write(record, a.results)}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
