"""`build_report(score_files, out_dir, claims_csv=None, diagnostics=())`: the report in out_dir.

Always `results.csv`, `index.html`, `accuracy_vs_compute.png`, one provenance page per
record in the inputs' lineage (`prov/*.html`, report/lineage.py) and one transcript page per
run whose generations are on disk (`transcripts/…`, report/transcripts.py); with `claims_csv` (from
scoring/claims.py) a summary per paper and the claims beside the papers' numbers
(report/paper.py, paper_numbers.yaml); with `diagnostics` (refinement diagnostics JSONs, see
report/diagnostics_table.py) a per-depth table and `depth_curves.png`; with `sections`
(method families' section JSONs, report/sections.py) one section each. The HTML is rendered
by jinja2 from `templates/index.html.j2` and the partials it includes (files, so the layout
is edited without touching code) and embeds the PNGs by relative path. Every number links
to the page of the provenance record behind it (its tooltip names the record's sha256; the
CSV has the full hash).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import jinja2

# the submodules themselves, not the package (whose __init__ imports this module)
import retrace.report.lineage as lineage
import retrace.report.paper as paper
import retrace.report.transcripts as transcripts
from retrace import deviations
from retrace.report.claims_table import P_ADJ, read_claims
from retrace.report.diagnostics_table import diagnostic_rows, extraction_rows, grid_tables, load_diagnostics
from retrace.report.plots import accuracy_vs_compute, depth_curves
from retrace.report.run_summary import run_summary
from retrace.report.sections import copy_images, load_sections
from retrace.report.tables import extra_columns, k_columns, result_rows, seed_aggregates, write_csv
from retrace.util.atomic import atomic_open

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
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["num"] = fmt_number
    env.filters["short"] = lambda h: str(h)[:SHORT_HASH]
    env.filters["signed"] = lambda v: "" if v is None else f"{v:+.3f}"
    env.filters["pvalue"] = fmt_pvalue
    env.filters["pp"] = lambda v: "" if v is None else f"{v * 100:+.1f}"
    return env


def _groups(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """Consecutive runs of rows with the same `keys`, as {key: value, ..., "rows": [...]}."""
    groups: list[dict] = []
    for row in rows:
        ident = {k: row.get(k) for k in keys}
        if not groups or any(groups[-1][k] != v for k, v in ident.items()):
            groups.append({**ident, "rows": []})
        groups[-1]["rows"].append(row)
    return groups


def claim_groups(claims: list[dict], refs: dict) -> list[dict]:
    """Claims rows grouped by paper (in the data file's order), then model and dataset."""
    order = {k: i for i, k in enumerate(refs["papers"])}
    ordered = sorted(claims, key=lambda c: (order.get(c["paper_key"], len(order)), c["model"], c["dataset"]))
    groups = _groups(ordered, ("paper_key", "model", "dataset"))
    for g in groups:
        g["paper_title"] = refs["papers"].get(g["paper_key"], {}).get("title", "other claims")
    return groups


def render_html(
    rows: list[dict],
    aggregates: list[dict],
    claims: Sequence[dict] = (),
    diagnostics: Sequence[dict] = (),
    images: dict[str, str] | None = None,
    grids: Sequence[dict] = (),
    sections: Sequence[dict] = (),
    pages: dict[str, str] | None = None,
    settings: dict | None = None,
    engine: dict | None = None,
    banner: str = "",
    transcripts: dict[str, str] | None = None,
) -> str:
    """The report page: `rows` (one per job), `aggregates` (one per multi-seed config),
    `claims` (claims.csv rows), `diagnostics` (one per refine job per depth), `images`
    ({"accuracy_vs_compute" | "depth_curves": path relative to the page}), `pages`
    ({record sha256: provenance page}), `settings` ({score record sha256: our setting}) and
    `engine` (the run summary: retrace.report.run_summary's rows and total); `banner`: the
    smoke-run line opening the page (smoke_banner); `transcripts` ({score record sha256: its
    transcript page}, report/transcripts.py)."""
    refs = paper.load_paper_numbers()
    claims = paper.annotate_claims(list(claims), refs, settings or {})
    pages = pages or {}
    template = environment().get_template("index.html.j2")
    return template.render(
        rows=rows,
        aggregates=aggregates,
        k_columns=k_columns(rows) + extra_columns(rows),
        claims=claims,
        claim_groups=claim_groups(claims, refs),
        summary=paper.summarise(claims, refs),
        deviations=deviations.for_report(claims),
        has_p_adj=any(c.get(P_ADJ) is not None for c in claims),
        result_groups=_groups(rows, ("model", "dataset")),
        diagnostics=list(diagnostics),
        extraction=extraction_rows(rows),
        images=images or {},
        grids=list(grids),
        sections=list(sections),
        prov_link=lambda h: pages.get(h, ""),
        transcripts=transcripts or {},
        engine=engine or {"rows": [], "total": {}},
        simulated=is_simulated(rows, claims),
        smoke=banner,
        subset=subset_banner(claims),
    )


def subset_banner(claims: list[dict]) -> str:
    """The banner of a run whose claims stand on a subset of the questions (claims.csv
    `subset`: `retrace run --limit N`, or a dataset's own limit), "" for a full run."""
    subsets = sorted({str(c.get("subset") or "full") for c in claims} - {"full"})
    if not subsets:
        return ""
    return (
        f"SUBSET ({', '.join(subsets)}): these verdicts stand on a subset of the questions, not on "
        "the full datasets; running at growing limits until a claim reads supported is optional "
        "stopping, so read them as a preview"
    )


def smoke_banner(claims: list[dict], probes: Iterable[Path] = ()) -> str:
    """The banner of a run whose claims stand on fewer than MIN_QUESTIONS questions ("" when
    none do): such verdicts are inconclusive by rule, so the page names the command that gives
    a real one, `make controls`, with its CPU time here (retrace.planning.estimate: the probe's measured
    rate when this run has one, else the stated default)."""
    from retrace.scoring.claims import MIN_QUESTIONS

    small = [
        c for c in claims if str(c.get("n_questions", "")).isdigit() and int(c["n_questions"]) < MIN_QUESTIONS
    ]
    if not small:
        return ""
    return (
        f"smoke run: verdicts are inconclusive by rule (n < {MIN_QUESTIONS}); for a real verdict on a CPU "
        f"run `make controls` (≈ {controls_hours(probes):.1f} h here); on GPUs see paper.yaml"
    )


def controls_hours(probes: Iterable[Path] = ()) -> float:
    """CPU hours of the `controls` experiment at this run's probed rate (or the default)."""
    from retrace.config.compose import check_global
    from retrace.planning.estimate import estimate
    from retrace.planning.plan import jobs

    probe_dirs = {Path(p).parent.parent for p in probes}  # results/probe/<model>/<backend>.json
    return estimate(
        jobs(check_global({"experiment": "controls"})), None, (), next(iter(probe_dirs), None)
    ).cpu_hours


def is_simulated(rows: list[dict], claims: list[dict]) -> bool:
    """Whether any number came from the simulated engine (backends/simulated.py): the report
    then carries a banner saying so. Score paths are model/backend/dataset/label/seed."""
    return any("/simulated/" in str(r.get("score_file", "")) for r in rows) or any(
        c.get("engine") == "simulated" for c in claims
    )


def build_report(
    score_files: list[Path],
    out_dir: Path,
    claims_csv: Path | None = None,
    diagnostics: Iterable[Path] = (),
    sections: Iterable[Path] = (),
    probes: Iterable[Path] = (),
) -> list[Path]:
    """Read every input (and its provenance); write the report files atomically; return them.

    Inputs are all read before anything is written, so a bad one leaves out_dir untouched.
    """
    rows = result_rows(score_files)
    if not rows:
        raise ValueError("no score files to report")
    claims = read_claims(Path(claims_csv)) if claims_csv is not None else []
    diagnostics, sections = list(diagnostics), list(sections)
    diags = load_diagnostics(diagnostics)
    out_dir = Path(out_dir)
    secs, copies = load_sections(sections, out_dir)
    probes = list(probes)
    roots = [*score_files, *diagnostics, *sections, *probes] + ([claims_csv] if claims_csv else [])
    nodes = lineage.collect(roots)
    engine_rows, engine_total = run_summary(nodes, probes)
    settings = {r["prov_sha256"]: paper.run_setting(Path(r["score_file"])) for r in rows}
    written = [accuracy_vs_compute(rows, out_dir / ACCURACY_PNG)]
    images = {"accuracy_vs_compute": ACCURACY_PNG}
    if diags:
        written.append(depth_curves(diags, out_dir / DEPTH_PNG))
        images["depth_curves"] = DEPTH_PNG
    write_csv(out_dir / "results.csv", rows)
    written += copy_images(copies)
    written += lineage.write_pages(nodes, out_dir, environment())
    pages_written, transcript_pages = transcripts.write_pages(rows, out_dir, environment())
    written += pages_written
    html = render_html(
        rows,
        seed_aggregates(rows),
        claims,
        diagnostic_rows(diags),
        images,
        grid_tables(diags),
        secs,
        {h: lineage.page_name(h) for h in nodes},
        settings,
        engine={"rows": engine_rows, "total": engine_total},
        banner=smoke_banner(claims, probes),
        transcripts=transcript_pages,
    )
    with atomic_open(out_dir / "index.html") as f:
        f.write(html)
    return [*written, out_dir / "results.csv", out_dir / "index.html"]
