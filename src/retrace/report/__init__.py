"""The report: one CSV row and one HTML table row per (model, dataset, method, seed),
plus the paper's claims, refinement diagnostics per depth and two figures.

- `tables.py` reads score JSONs and their provenance records into flat rows, aggregates
  seeds (mean +- sd) and writes `results.csv`
- `claims_table.py` reads claims.csv (scoring/claims.py) for the Claims section
- `diagnostics_table.py` reads refinement diagnostics JSONs into per-depth rows
- `plots.py` draws accuracy_vs_compute.png and depth_curves.png (matplotlib, Agg)
- `html.py` renders `index.html` from `templates/`; `build_report` writes everything

Every number carries the sha256 of the provenance record of the file it came from.
Usage: `from retrace.report import build_report;
build_report(score_files, out_dir, claims_csv=None, diagnostics=())`;
tests: `python -m pytest tests/unit/test_report.py tests/unit/test_plots.py`.
"""
from __future__ import annotations

from retrace.report.html import build_report

__all__ = ["build_report"]
