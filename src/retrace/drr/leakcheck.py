"""Stage `drr leakcheck`: scan every stored prompt and DM row for the gold answer.

    python -m retrace drr leakcheck --problems Q.jsonl ... --scan prompts.jsonl train.jsonl ... --out leak.json

Uses discriminator/leak.py (what counts as a leak, and what it cannot catch, is documented
there). Choices are numbered from 0 in every DRR prompt, so index statements ("Answer: 2")
are checked with index base 0. Verdict: pass / fail / incomplete (a record whose question
is unknown). With `drr.leak_check: fail` (the default) a verdict other than pass fails the
job after logging the findings, so no claims are written from a leaking run (drr summarise
needs this job's output, and refuses a non-pass verdict itself too); `leak_check: report`
writes the verdict and lets the run go on (the report shows it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from retrace import data
from retrace.atomic import write_json
from retrace.discriminator import leak

MODES = ("fail", "report")


def refuse(result: Mapping, mode: str, where: str) -> None:
    """SystemExit naming the findings when the verdict is not pass and mode is "fail"."""
    if mode not in MODES:
        raise ValueError(f"drr.leak_check: {mode!r} ({' | '.join(MODES)})")
    if mode == "fail" and result["verdict"] != "pass":
        shown = "\n".join(
            f"  {f['file']}:{f['line']} {f['field']} {f['kind']}: {f['excerpt']!r}"
            for f in result["findings"][:20]
        )
        raise SystemExit(
            f"gold leak check: {result['verdict']} ({result['n_findings']} findings, "
            f"{result['n_unchecked']} unchecked records) in {where}; no claims are "
            f"written from this run (set drr.leak_check: report to only report)\n{shown}"
        )


def run(cfg: Mapping, problem_files: list[Path], scan_files: list[Path], out: Path) -> dict:
    from retrace.drr.stages import _prov

    problems = [p for f in problem_files for p in data.read_problems(f)]
    result = leak.scan_files(scan_files, problems)
    result["files"] = [str(f) for f in scan_files]
    result["mode"] = cfg["leak_check"]
    refuse(result, cfg["leak_check"], ", ".join(map(str, scan_files)))
    write_json(out, result)
    _prov("leakcheck", cfg, list(problem_files) + list(scan_files), verdict=result["verdict"]).write(out)
    return result
