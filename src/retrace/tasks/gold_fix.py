"""Gold fixes: per-dataset tables of golds corrected at data loading, with their reasons.

A table is `src/retrace/tasks/gold_fixes/<task>.yaml`, `fixes:` a list of
{id, row, gold, fixed, reason}: the problem id, the source row's field as the data has it,
the gold as the loader builds it, the corrected gold, and why (a typo, a `name = value`
gold reduced to its value). The data stage (retrace.stages.data) applies it to every
problem it loads, before anything downstream reads a gold:

    from retrace.tasks.gold_fix import apply_fixes
    problems = apply_fixes("olympiadbench", problems)

Only the data stage imports this module, so editing a table re-keys the data stage alone
(and, through the data's content, the jobs of that dataset), not every generation job.

A fixed problem keeps the original gold and the reason in `metadata["gold_fix"]`, so the
prepared data (and its fingerprint) say what was changed; the data stage lists the fixes in
its provenance (retrace.stages.data). A table whose `gold` no longer matches the data is an
error naming the table and id: the data changed, and a fix must not apply blind.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from retrace.util.records import Problem

FIXES_DIR = Path(__file__).resolve().parent / "gold_fixes"
KEYS = ("id", "gold", "fixed", "reason")


@cache
def fixes(task: str) -> dict[str, dict]:
    """{problem id: fix} of `task`'s table ({} when it has none); a malformed entry names
    the file and entry."""
    from retrace.util.yamlfile import load_yaml

    path = FIXES_DIR / f"{task}.yaml"
    if not path.exists():
        return {}
    out = {}
    for i, entry in enumerate((load_yaml(path) or {}).get("fixes") or []):
        missing = [k for k in KEYS if not isinstance(entry, dict) or not isinstance(entry.get(k), str | int)]
        if missing:
            raise ValueError(f"{path}: fixes[{i}]: missing or not text: {', '.join(missing)}")
        out[str(entry["id"])] = entry
    return out


def apply_fix(task: str, problem: Problem, where: str) -> Problem:
    """`problem` with its gold fixed if `task`'s table lists its id (module docstring)."""
    fix = fixes(task).get(problem.id)
    if fix is None:
        return problem
    if problem.gold != str(fix["gold"]):
        raise ValueError(
            f"{where}: gold fix {problem.id!r} (src/retrace/tasks/gold_fixes/{task}.yaml) expects gold "
            f"{fix['gold']!r}, the data has {problem.gold!r}"
        )
    meta = dict(
        problem.metadata, gold_fix={"from": problem.gold, "reason": " ".join(str(fix["reason"]).split())}
    )
    return Problem(problem.id, problem.question, str(fix["fixed"]), problem.choices, meta)


def apply_fixes(task: str, problems: list[Problem]) -> list[Problem]:
    """`apply_fix` to each problem, an error naming its source row (metadata source:line)."""
    return [apply_fix(task, p, _where(p)) for p in problems]


def _where(p: Problem) -> str:
    meta = p.metadata or {}
    return f"{meta.get('source', '?')}:{meta.get('line', meta.get('index', p.id))}"


def fixed_golds(problems: list[Problem]) -> list[dict]:
    """[{id, from, to, reason}] of the problems whose gold a table fixed (for provenance)."""
    return [
        {
            "id": p.id,
            "from": p.metadata["gold_fix"]["from"],
            "to": p.gold,
            "reason": p.metadata["gold_fix"]["reason"],
        }
        for p in problems
        if "gold_fix" in (p.metadata or {})
    ]
