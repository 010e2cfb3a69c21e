"""`snakemake --lint`, with every lint either fixed or waived by a justified comment.

Run: `make lint` (or `python .ci/snakemake_lint.py [snakemake args]` with the venv's Python).
A waiver is a comment in the Snakefile or a workflow/rules/*.smk file:

    # snakemake-lint: CACHE -- why this lint does not apply here

The key is the global a shell command reads (`CACHE`, `PY`, ...), `conda` for "Specify a conda
environment or container", or `mixed-rules-and-functions`; a waiver holds for the whole workflow,
so it sits once beside what it is about (workflow/rules/common.smk). The text after the key is
the justification; an empty one is refused.
Also refused, with no waiver: a `shell:` or `run:` body written as an f-string. Snakemake
evaluates a shell string twice, once where the rule is defined and again inside the job's run
function when the job runs; a rule made in a `for` loop then runs with the loop's *last* values
(the dry run prints the right command, the job runs another: issue 51's served cells ran as
llama.cpp). Put such values in `params:` instead.
Exit 0 when every lint is waived; else the unwaived lints, one line each, and exit 1.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAIVER = re.compile(r"#\s*snakemake-lint:\s*([\w-]+)\s*(?:--|—|:)?\s*(.*)$")
BLOCK = re.compile(r"^Lints for (rule (\w+) \(line \d+, (.+?)\)|snakefile (.+?)):$")
VARIABLE = re.compile(r"Shell command directly uses variable (\w+)")


def workflow_files() -> list[Path]:
    """The Snakefile and every workflow/rules/*.smk file."""
    return [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]


def waivers() -> set[str]:
    """The waived keys; a waiver without a reason is an error."""
    found = set()
    for path in workflow_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if m := WAIVER.search(line):
                if not m.group(2).strip():
                    sys.exit(f"{path.relative_to(ROOT)}:{n}: waiver of {m.group(1)!r} gives no reason")
                found.add(m.group(1))
    return found


BODY = re.compile(r"^\s*(shell|run):\s*(.*)$")
FSTRING = re.compile(r"^[rRbB]?[fF][rR]?[\"']")


def fstring_bodies() -> list[str]:
    """file:line of each shell/run body that starts with an f-string (see the docstring)."""
    found = []
    for path in workflow_files():
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            if not (m := BODY.match(line)):
                continue
            body = m.group(2).split("#")[0].strip()  # the body on the same line, or the next one
            body = body or next(
                (x.strip() for x in lines[n + 1 :] if x.strip() and not x.strip().startswith("#")), ""
            )
            if FSTRING.match(body):
                found.append(f"{path.relative_to(ROOT)}:{n + 1}")
    return found


def lints(text: str) -> list[tuple[str, str, str]]:
    """(where, file, key) of each lint in `snakemake --lint`'s text output."""
    out, where, file = [], "", ""
    for line in text.splitlines():
        if m := BLOCK.match(line):
            where = f"rule {m.group(2)}" if m.group(2) else "snakefile"
            file = str(Path(m.group(3) or m.group(4)).resolve())
        elif line.startswith("    * "):
            var = VARIABLE.search(line)
            key = var.group(1) if var else "conda" if "conda environment" in line else None
            key = key or ("mixed-rules-and-functions" if "Mixed rules and functions" in line else line[6:])
            out.append((where, file, key))
    return out


def main(argv: list[str]) -> int:
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    proc = subprocess.run([snakemake, "--lint", *argv], cwd=ROOT, capture_output=True, text=True)
    found = lints(proc.stdout + proc.stderr)
    if proc.returncode != 0 and not found:  # it failed before linting (config, syntax)
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    for where in fstring_bodies():
        print(f"{where}: a shell/run body written as an f-string (use params:; see .ci/snakemake_lint.py)")
    if fstring_bodies():
        return 1
    waived = waivers()
    bad = [(where, file, key) for where, file, key in found if key not in waived]
    for where, file, key in bad:
        print(f"{Path(file).relative_to(ROOT)}: {where}: {key}")
    print(f"snakemake --lint: {len(found)} lints, {len(found) - len(bad)} waived, {len(bad)} left")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
