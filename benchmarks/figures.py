"""Regenerate every measured figure in README.md and docs/ from the result files.

    .venv/bin/python benchmarks/figures.py           # or: make figures  (rewrites the files)
    .venv/bin/python benchmarks/figures.py --check   # exit 1 and one line per stale figure

A published number sits between markers in the Markdown, `<!-- figure:ID -->...<!-- /figure -->`
(inline, e.g. a time in a sentence, or a whole table), and docs/measurements/figures.yaml says
where figure ID comes from: the newest result file (benchmarks/record.py) of a result name,
optionally the newest whose note contains a word, and either one `value` it printed (or a
record field, `meta`), a `table` of the last few results, or a `table` with a row per item
of `rows` from the newest one. So a figure is always what a committed command wrote; the
fast test tests/unit/test_figures.py fails when a file disagrees with its newest result.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "measurements" / "figures.yaml"
RESULTS = ROOT / "docs" / "measurements" / "results"
MARKER = re.compile(r"<!-- figure:([a-z0-9_-]+) -->(.*?)<!-- /figure -->", re.S)


class FigureError(ValueError):
    """A figure that cannot be drawn: the message names the figure and what is missing."""


def results(name: str, where: str = "", root: Path = RESULTS) -> list[dict[str, Any]]:
    """Successful results of NAME, newest first (optionally only those whose note has WHERE)."""
    found = []
    for path in sorted((root / name).glob("*.json"), reverse=True):
        rec = json.loads(path.read_text())
        if rec.get("rc") == 0 and where in rec.get("note", ""):
            found.append(rec)
    return found


def _cell(rec: dict[str, Any], col: dict[str, Any], fig: str) -> str:
    if "meta" in col:
        raw: Any = rec.get(col["meta"], "")
        if col["meta"] == "started":
            raw = str(raw).replace("T", " ")[:16]
    else:
        values = rec.get("values", {})
        if col["value"] not in values and "default" in col:  # a value older results did not print
            return str(col["default"])
        if col["value"] not in values:
            raise FigureError(
                f"figure {fig}: result {rec['name']} {rec['started']} printed no '{col['value']}'"
            )
        raw = values[col["value"]]
    return _format(raw, col)


def _format(raw: Any, col: dict[str, Any]) -> str:
    """`pattern` (a regex) picks the part of a printed value it groups; `format` and `scale`
    show a number (its first word, thousands commas allowed)."""
    text = str(raw)
    if "pattern" in col:
        m = re.search(col["pattern"], text)
        if not m:
            raise FigureError(f"'{text}' does not match the figure's pattern {col['pattern']!r}")
        text = m.group(1)
    if "format" not in col:
        return text
    number = float(text.split()[0].replace(",", "").rstrip("%")) * float(col.get("scale", 1))
    return str(col["format"]).format(number)


def render(fig: str, spec: dict[str, Any], root: Path = RESULTS) -> str:
    """Figure FIG's text: one value, or a Markdown table (newest result first)."""
    recs = results(spec["result"], spec.get("where", ""), root)
    if not recs:
        where = f" with '{spec['where']}' in its note" if spec.get("where") else ""
        raise FigureError(f"figure {fig}: no result file under {root.name}/{spec['result']}/{where}")
    if "table" not in spec:
        return _cell(recs[0], spec, fig)
    table = spec["table"]
    cols = table["columns"]
    lines = ["| " + " | ".join(c["head"] for c in cols) + " |", "|" + "---|" * len(cols)]
    if "rows" in table:  # one result, a row per item: `{row}` in a column's value label
        for item in table["rows"]:
            cells = [item if c.get("item") else _cell(recs[0], _for_row(c, item), fig) for c in cols]
            lines.append("| " + " | ".join(cells) + " |")
    else:  # the last few results, newest first
        for rec in recs[: int(table.get("last", 5))]:
            lines.append("| " + " | ".join(_cell(rec, c, fig) for c in cols) + " |")
    return "\n" + "\n".join(lines) + "\n"


def _for_row(col: dict[str, Any], item: str) -> dict[str, Any]:
    return {**col, "value": col["value"].format(row=item)} if "value" in col else col


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def regenerate(text: str, specs: dict[str, Any], root: Path = RESULTS) -> str:
    """TEXT with every figure marker's content drawn again."""

    def draw(m: re.Match[str]) -> str:
        fig = m.group(1)
        if fig not in specs:
            raise FigureError(f"figure {fig}: not in {SPEC.relative_to(ROOT)}")
        return f"<!-- figure:{fig} -->{render(fig, specs[fig], root)}<!-- /figure -->"

    return MARKER.sub(draw, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a figure is stale")
    a = p.parse_args(argv)
    specs = yaml.safe_load(SPEC.read_text()) or {}
    stale = 0
    for doc in documents():
        text = doc.read_text()
        try:
            new = regenerate(text, specs)
        except FigureError as e:
            print(f"{doc.relative_to(ROOT)}: {e}", file=sys.stderr)
            return 2
        if new != text:
            stale += 1
            if a.check:
                print(f"{doc.relative_to(ROOT)}: figures differ from their result files (make figures)")
            else:
                doc.write_text(new)
                print(f"figures: {doc.relative_to(ROOT)} regenerated")
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
