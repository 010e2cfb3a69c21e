"""Dead code in src/retrace (vulture), beside an allow-list that says why each name stays.

Run: `make lint` (or `.venv-lint/bin/python .ci/dead_code.py`). A name counts as used when
vulture finds a use in src/, tests/, benchmarks/ or .ci/; when it appears in the Snakefile, a
workflow/rules/*.smk file or a Jinja template (the rules and templates use the library, and
vulture cannot parse them); when its definition is registered by a decorator call
(`@TASKS.register("x")`, `@command(...)`: found by name at run time); and for an attribute set on
another library's object (`config.consume_fuel = True`: that library reads it). What else stays
is listed in ALLOWED below, each with its reason; a listed name that is no longer reported is an
error too, so the list cannot outlive its reasons.
Exit 0 when nothing else is unused; else one line per name and exit 1.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parents[1]
# name -> why it stays although no code names it
ALLOWED = {
    "prompts_dir": "plan._template_paths: a functools.cache key (the folder a test may point elsewhere)",
    "mtime_ns": "yamlfile._parsed: an lru_cache key, so an edited file is parsed again",
}


def rule_words() -> set[str]:
    """Every identifier in the Snakefile, the rule files and the templates: what they may use."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    files += sorted((ROOT / "src").rglob("*.j2"))
    words = {w for f in files for w in re.findall(r"[A-Za-z_]\w*", f.read_text())}
    # what a table names as "retrace.module:Name" is imported by name (engine/scorers.py)
    named = (re.findall(r"retrace\.[\w.]+:(\w+)", f.read_text()) for f in (ROOT / "src").rglob("*.py"))
    return words | {w for found in named for w in found}


def used_by_reflection(item) -> bool:
    """A definition registered by a decorator call, or an attribute set on another object."""
    lines = Path(item.filename).read_text().splitlines()
    line = lines[item.first_lineno - 1].strip()
    if item.typ == "attribute":
        return not line.startswith("self.")
    # a decorated definition's first line is its first decorator
    return item.typ in ("class", "function") and line.startswith("@") and "(" in line


def unused() -> list:
    v = Vulture()
    v.scavenge([str(ROOT / d) for d in ("src", "tests", "benchmarks", ".ci")])
    used = rule_words()
    return [
        item
        for item in v.get_unused_code(min_confidence=60)
        if Path(item.filename).is_relative_to(ROOT / "src")
        and item.name not in used
        and not used_by_reflection(item)
    ]


def main() -> int:
    found = unused()
    bad = [i for i in found if i.name not in ALLOWED]
    stale = sorted(set(ALLOWED) - {i.name for i in found})
    for item in bad:
        print(item.get_report(add_size=False))
    for name in stale:
        print(f".ci/dead_code.py: ALLOWED names {name!r}, which is used now (or gone): delete the entry")
    print(f"dead code: {len(bad)} unused names, {len(stale)} stale allow-list entries")
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
