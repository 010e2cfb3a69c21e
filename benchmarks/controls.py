"""Run a controls experiment and print its verdicts and cost as `label: value` lines.

    .venv/bin/python benchmarks/controls.py [--experiment controls|controls_falsifier] [--cores 2]

`make controls` and `make controls-falsifier` run this through benchmarks/record.py, so the
tables of docs/controls.md are drawn from a result file (`make figures`). It prints the plan's
estimate first (`retrace plan --estimate`: the time it expects), then runs the workflow
(`snakemake --cores N --config experiment=E`; Snakemake's own output goes to stderr), then,
per row of results/report/claims.csv (label CLAIM: the claim, a colon in it written " -", since
record.py reads a label up to its first colon):

    verdict (CLAIM): supported
    accuracy (CLAIM): 0.605 / 0.490               method / baseline
    effect (CLAIM): +0.115 [0.047, 0.183] (0.975)  the paired difference, its CI at its level
    p (CLAIM): 0.00029 (Holm 0.00059)
    won/tied/lost (CLAIM): 31/161/8               questions, method against baseline
    controls seconds: S                           the workflow's wall time
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "results" / "report" / "claims.csv"


def _num(text: str, fmt: str) -> str:
    try:
        return format(float(text), fmt)
    except ValueError:
        return text or "-"


def row_lines(row: dict[str, str]) -> list[str]:
    """The `label: value` lines of one claims.csv row."""
    label = row["claim"].replace(":", " -")
    ci = f"[{_num(row['ci_low'], '.3f')}, {_num(row['ci_high'], '.3f')}] ({_num(row['ci_level'], '.3f')})"
    return [
        f"verdict ({label}): {row['verdict']}",
        f"accuracy ({label}): {_num(row['acc_method'], '.3f')} / {_num(row['acc_baseline'], '.3f')}",
        f"effect ({label}): {_num(row['delta'], '+.3f')} {ci}",
        f"p ({label}): {_num(row['p_value'], '.2g')} (Holm {_num(row['p_adjusted'], '.2g')})",
        f"won/tied/lost ({label}): {row['wins']}/{row['ties']}/{row['losses']}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", default="controls")
    ap.add_argument("--cores", type=int, default=2)
    a = ap.parse_args(argv)
    bin_dir = Path(sys.executable).parent
    plan = [str(bin_dir / "retrace"), "plan", "--experiment", a.experiment, "--estimate"]
    estimate = subprocess.run(plan, capture_output=True, text=True, cwd=ROOT)
    print(next((ln for ln in estimate.stdout.splitlines() if ln.startswith("estimate:")), "estimate: -"))
    started = time.monotonic()
    cmd = [str(bin_dir / "snakemake"), "--cores", str(a.cores), "--config", f"experiment={a.experiment}"]
    rc = subprocess.run(cmd, cwd=ROOT, stdout=sys.stderr).returncode
    if rc != 0:
        print(f"controls: snakemake exited {rc}", file=sys.stderr)
        return rc
    print(f"controls seconds: {time.monotonic() - started:.0f}")
    with CLAIMS.open(newline="") as f:
        for row in csv.DictReader(f):
            print("\n".join(row_lines(row)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
