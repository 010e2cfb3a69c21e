"""Demonstration leak: no evaluated item may be an input of a library demonstration.

    inputs = library_inputs(dirs)          # {key: ["base/arithmetic/navigate.txt#1", …]}
    clean, dropped = exclude(problems, inputs)   # what splits draw from, and what they left out
    python -m retrace art leakcheck --experiment smoke --data-dir results/data --out L.json RUN.jsonl …

A library demonstration shows the model a worked program with its answer; if its `Input:`
is also a test (or held-out) item, that item is answered in the prompt. The shipped
navigate demonstration "Take 3 steps. Turn around. Take 3 steps." is such an item of
BIG-bench navigate. So:
- splits (art/stages.py `split`) draw only from problems whose input appears in no
  demonstration of any library directory the experiment names (every version);
- the `art leakcheck` job reads what each run actually used (the test and pool ids in its
  provenance) and reports every overlap; one is a failure (exit 1) unless `--no-strict`.
The report's ART section shows its verdict and the excluded items.

What counts as the same input: a demonstration's `Input:` with its "(A) …" option lines
removed, lower-cased with runs of whitespace collapsed (retrace.tasks._exact.normalise),
equal to the problem's question, to one of its paragraphs (BIG-bench prefixes the task's
instruction, which a program keeps in its Description), or to its options (an input made
only of options). Not caught: paraphrases, the same item with other numbers or names, and a
question that a demonstration embeds in a longer input or that differs by one word.
"""

from __future__ import annotations

import re
from pathlib import Path

from retrace.art.program import ProgramError, parse
from retrace.tasks._exact import normalise
from retrace.util.records import Problem

_OPTION = re.compile(r"(?m)^\s*\([A-Z]\)\s.*$")


def key(text: str) -> str:
    """The comparable form of an input: no option lines, normalised (see module doc); an
    input made only of options (hyperbaton's) keeps them."""
    return normalise(_OPTION.sub("", text)) or normalise(text)


def problem_keys(p: Problem) -> set[str]:
    """Every form in which a demonstration could show this problem: its question, each of
    its paragraphs (BIG-bench questions lead with the task's instruction, which a library
    program puts in its Description), and the question with its options."""
    from retrace.art.metrics import format_input

    paragraphs = [par for par in re.split(r"\n\s*\n", p.question) if par.strip()]
    keys = {key(p.question), normalise(format_input(p))} | {key(par) for par in paragraphs}
    if p.choices:
        keys.add(normalise(format_input(Problem(p.id, "", p.gold, p.choices))))
    return keys - {""}


def library_inputs(dirs) -> dict[str, list[str]]:
    """{input key: ["<dir>/<cluster>/<task>.txt#<n>", …]} over every demonstration file."""
    from retrace.art.library import read_demos

    out: dict[str, list[str]] = {}
    for d in dirs:
        d = Path(d)
        for path in sorted(d.glob("*/*.txt")):
            for n, demo in enumerate(read_demos(path), 1):
                try:
                    text = parse(demo).input
                except ProgramError:  # read_demos already refused unparsable files
                    continue
                out.setdefault(key(text), []).append(f"{d.name}/{path.parent.name}/{path.name}#{n}")
    return out


def overlapping(problems: list[Problem], inputs: dict[str, list[str]]) -> dict[str, list[str]]:
    """{problem id: demonstrations whose input is that problem}."""
    out = {}
    for p in problems:
        hits = [d for k in sorted(problem_keys(p)) for d in inputs.get(k, [])]
        if hits:
            out[p.id] = list(dict.fromkeys(hits))
    return out


def exclude(problems: list[Problem], inputs: dict[str, list[str]]) -> tuple[list[Problem], dict]:
    """(problems no demonstration shows, {dropped id: demonstrations})."""
    hits = overlapping(problems, inputs)
    return [p for p in problems if p.id not in hits], hits


def check_runs(
    runs: list[dict], problems_by_task: dict[str, list[Problem]], inputs: dict[str, list[str]]
) -> dict:
    """Overlaps between library inputs and what each run used (`runs`: their provenance's
    job and data records). Verdict "clean" when no used item overlaps."""
    findings, excluded = [], {}
    for task, problems in problems_by_task.items():
        excluded[task] = overlapping(problems, inputs)
    for r in runs:
        hits = excluded.get(r["job"]["task"], {})
        for role in ("test_ids", "pool_ids"):
            for pid in r["data"].get(role, []):
                if pid in hits:
                    findings.append(
                        {
                            "run": r["path"],
                            "task": r["job"]["task"],
                            "id": pid,
                            "role": role[:-4],
                            "demonstrations": hits[pid],
                        }
                    )
    return {
        "verdict": "leak" if findings else "clean",
        "n_runs": len(runs),
        "n_findings": len(findings),
        "findings": findings,
        "n_library_inputs": len(inputs),
        "excluded": {t: sorted(h) for t, h in excluded.items()},
        "method": "whole-input match after removing option lines and normalising (art/overlap.py)",
    }


def load_runs(paths) -> list[dict]:
    from retrace.store.provenance import load

    runs = []
    for p in paths:
        rec = load(p)
        runs.append({"path": str(p), "job": rec["job"], "data": rec["data"]})
    return runs


def summary_rows(result: dict) -> list[list]:
    excluded = "; ".join(f"{t}: {', '.join(ids)}" for t, ids in result["excluded"].items() if ids) or "none"
    return [[result["verdict"], result["n_runs"], result["n_library_inputs"], result["n_findings"], excluded]]
