"""The report: a summary of which papers' claims held, each claim beside the paper's own
number, one CSV row and one HTML table row per (model, dataset, method, seed), refinement
diagnostics per depth, figures, and a provenance page behind every number.

- `tables.py` reads score JSONs and their provenance records into rows (pandas), aggregates
  seeds (mean +- sd) and writes `results.csv`
- `claims_table.py` reads claims.csv (scoring/claims.py) for the Claims section
- `paper.py` puts the papers' numbers (`config/paper_numbers.yaml`) beside the claims, compares
  the settings and writes the per-paper summary
- `lineage.py` renders one page per provenance record (`prov/*.html`), linked up the lineage
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
