"""`build_report(score_files, out_dir)`: write `results.csv` and `index.html` into out_dir.

The HTML is rendered by jinja2 from `templates/index.html.j2` (a file, so the layout is
edited without touching code). Every number's tooltip names the sha256 of the provenance
record behind it; the table shows its first 12 characters, the CSV the full hash.
"""
from __future__ import annotations

import math
from pathlib import Path

import jinja2

from retrace.atomic import atomic_open
from retrace.report.tables import k_columns, result_rows, seed_aggregates, write_csv

TEMPLATES = Path(__file__).parent / "templates"
SHORT_HASH = 12


def fmt_number(value: object, digits: int = 3) -> str:
    """Fixed-point for fractions, thousands separators for counts, e-notation for FLOPs."""
    if value is None or value == "":
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:.3e}" if abs(value) >= 1e9 else f"{value:,}"
    if isinstance(value, float) and math.isfinite(value) and abs(value) >= 1e9:
        return f"{value:.3e}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["num"] = fmt_number
    env.filters["short"] = lambda h: str(h)[:SHORT_HASH]
    return env


def render_html(rows: list[dict], aggregates: list[dict]) -> str:
    """The report page for `rows` (one per job) and `aggregates` (one per multi-seed config)."""
    template = environment().get_template("index.html.j2")
    return template.render(rows=rows, aggregates=aggregates, k_columns=k_columns(rows))


def build_report(score_files: list[Path], out_dir: Path) -> None:
    """Read every score file (and its .prov.json); write results.csv and index.html atomically."""
    rows = result_rows(score_files)
    if not rows:
        raise ValueError("no score files to report")
    out_dir = Path(out_dir)
    write_csv(out_dir / "results.csv", rows)
    html = render_html(rows, seed_aggregates(rows))
    with atomic_open(out_dir / "index.html") as f:
        f.write(html)
