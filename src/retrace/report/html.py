"""`build_report(score_files, out_dir, claims_csv=None, diagnostics=())`: the report in out_dir.

Always `results.csv`, `index.html` and `accuracy_vs_compute.png`; with `claims_csv` (from
scoring/claims.py) a Claims section; with `diagnostics` (refinement diagnostics JSONs, see
report/diagnostics_table.py) a per-depth table and `depth_curves.png`; with `sections`
(method families' section JSONs, report/sections.py) one section each. The HTML is rendered
by jinja2 from `templates/index.html.j2` and the partials it includes (files, so the layout
is edited without touching code) and embeds the PNGs by relative path. Every number's
tooltip names the sha256 of the provenance record behind it; the table shows its first 12
characters, the CSV the full hash.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable

import jinja2

from retrace.atomic import atomic_open
from retrace.report.claims_table import read_claims
from retrace.report.diagnostics_table import diagnostic_rows, grid_tables, load_diagnostics
from retrace.report.plots import accuracy_vs_compute, depth_curves
from retrace.report.sections import copy_images, load_sections
from retrace.report.tables import k_columns, result_rows, seed_aggregates, write_csv

TEMPLATES = Path(__file__).parent / "templates"
SHORT_HASH = 12
ACCURACY_PNG = "accuracy_vs_compute.png"
DEPTH_PNG = "depth_curves.png"


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


def fmt_pvalue(p: float | None) -> str:
    """Three decimals, or e-notation below 0.001 so a tiny p-value does not read as 0."""
    if p is None:
        return ""
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["num"] = fmt_number
    env.filters["short"] = lambda h: str(h)[:SHORT_HASH]
    env.filters["signed"] = lambda v: "" if v is None else f"{v:+.3f}"
    env.filters["pvalue"] = fmt_pvalue
    return env


def render_html(rows: list[dict], aggregates: list[dict], claims: list[dict] = (),
                diagnostics: list[dict] = (), images: dict[str, str] | None = None,
                grids: list[dict] = (), sections: list[dict] = ()) -> str:
    """The report page: `rows` (one per job), `aggregates` (one per multi-seed config),
    `claims` (claims.csv rows), `diagnostics` (one per refine job per depth) and `images`
    ({"accuracy_vs_compute" | "depth_curves": path relative to the page})."""
    template = environment().get_template("index.html.j2")
    return template.render(rows=rows, aggregates=aggregates, k_columns=k_columns(rows),
                           claims=list(claims), diagnostics=list(diagnostics),
                           images=images or {}, grids=list(grids), sections=list(sections))


def build_report(score_files: list[Path], out_dir: Path, claims_csv: Path | None = None,
                 diagnostics: Iterable[Path] = (), sections: Iterable[Path] = ()) -> list[Path]:
    """Read every input (and its provenance); write the report files atomically; return them.

    Inputs are all read before anything is written, so a bad one leaves out_dir untouched.
    """
    rows = result_rows(score_files)
    if not rows:
        raise ValueError("no score files to report")
    claims = read_claims(Path(claims_csv)) if claims_csv is not None else []
    diags = load_diagnostics(diagnostics)
    out_dir = Path(out_dir)
    secs, copies = load_sections(sections, out_dir)
    written = [accuracy_vs_compute(rows, out_dir / ACCURACY_PNG)]
    images = {"accuracy_vs_compute": ACCURACY_PNG}
    if diags:
        written.append(depth_curves(diags, out_dir / DEPTH_PNG))
        images["depth_curves"] = DEPTH_PNG
    write_csv(out_dir / "results.csv", rows)
    written += copy_images(copies)
    html = render_html(rows, seed_aggregates(rows), claims, diagnostic_rows(diags), images,
                       grid_tables(diags), secs)
    with atomic_open(out_dir / "index.html") as f:
        f.write(html)
    return [*written, out_dir / "results.csv", out_dir / "index.html"]
