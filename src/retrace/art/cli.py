"""`python -m retrace art <command> …`: ART's stages, called by workflow/rules/art.smk.

    retrace art jobs --experiment smoke                 # list the ART jobs of an experiment
    retrace art select --experiment E --model M --task T --version V --data D.jsonl \
        --manifest M.json --cache C.sqlite --out selection.json
    retrace art run --experiment E --model M --task T --label L --seed S --data D.jsonl \
        --manifest M.json --cache C.sqlite [--selection S.json] --out run.jsonl
    retrace art leakcheck --experiment E --data-dir results/data --out L.json [--no-strict] RUN.jsonl …
    retrace art summarize --experiment E --data-dir results/data --out-dir DIR [--leak L.json] RUN.jsonl …
    retrace art check FILE…                             # parse library files (errors name file:line)
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="retrace art", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("jobs", help="list the ART jobs of an experiment")
    p.add_argument("--experiment", required=True)
    for name in ("select", "run"):
        p = sub.add_parser(name)
        p.add_argument("--experiment", required=True)
        p.add_argument("--model", required=True)
        p.add_argument("--task", required=True)
        p.add_argument("--data", type=Path, required=True)
        p.add_argument("--manifest", type=Path, required=True)
        p.add_argument("--cache", type=Path, required=True)
        p.add_argument("--out", type=Path, required=True)
        if name == "select":
            p.add_argument("--version", required=True)
        else:
            p.add_argument("--label", required=True)
            p.add_argument("--seed", type=int, required=True)
            p.add_argument("--selection", type=Path, default=None)
    p = sub.add_parser("leakcheck", help="library demonstration inputs among the items runs used")
    p.add_argument("--experiment", required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--no-strict", dest="strict", action="store_false", help="report a leak, do not fail")
    p.add_argument("runs", type=Path, nargs="+")
    p = sub.add_parser("summarize", help="scores, claims CSV and report section")
    p.add_argument("--experiment", required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--leak", type=Path, default=None, help="the leakcheck result (a report table)")
    p.add_argument("runs", type=Path, nargs="+")
    p = sub.add_parser("check", help="parse library files")
    p.add_argument("files", type=Path, nargs="+")
    return ap


def main(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    if a.command == "jobs":
        from retrace.art import plan
        from retrace.art.stages import art_config

        for j in plan.jobs(art_config(a.experiment)):
            print(j.path)
    elif a.command == "select":
        from retrace.art import stages

        stages.select(a.experiment, a.model, a.task, a.version, a.data, a.manifest, a.cache, a.out)
    elif a.command == "run":
        from retrace.art import plan, stages

        job = plan.ArtJob(a.model, a.task, a.label, a.seed)
        stages.run(a.experiment, job, a.data, a.manifest, a.cache, a.out, a.selection)
    elif a.command == "leakcheck":
        from retrace.art import stages

        stages.leakcheck(a.experiment, a.runs, a.data_dir, a.out, a.strict)
    elif a.command == "summarize":
        from retrace.art import summary

        summary.run(a.experiment, a.runs, a.data_dir, a.out_dir, a.leak)
    elif a.command == "check":
        from retrace.art.library import read_demos

        for f in a.files:
            print(f"{f}: {len(read_demos(f))} programs")
    return 0
