"""Stage `drr leakcheck`: scan every stored prompt and DM row for the gold answer.

    python -m retrace drr leakcheck --problems Q.jsonl ... --scan prompts.jsonl train.jsonl ... --out leak.json

Uses discriminator/leak.py (what counts as a leak, and what it cannot catch, is documented
there). Choices are numbered from 0 in every DRR prompt, so index statements ("Answer: 2")
are checked with index_base=0. Verdict: pass / fail / incomplete (a record whose question
is unknown); the report shows it, and `--strict` makes a non-pass verdict fail the job.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from retrace import data
from retrace.atomic import write_json
from retrace.discriminator import leak


def run(cfg: Mapping, problem_files: list[Path], scan_files: list[Path], out: Path,
        strict: bool = False) -> dict:
    from retrace.drr.stages import _prov
    problems = [p for f in problem_files for p in data.read_problems(f)]
    result = leak.scan_files(scan_files, problems, index_base=0)
    result["files"] = [str(f) for f in scan_files]
    write_json(out, result)
    _prov("leakcheck", cfg, list(problem_files) + list(scan_files), verdict=result["verdict"]).write(out)
    if strict and result["verdict"] != "pass":
        raise SystemExit(f"gold leak check: {result['verdict']} ({result['n_findings']} findings) -> {out}")
    return result
