"""The report: one CSV row and one HTML table row per (model, dataset, method, seed).

- `tables.py` reads score JSONs and their provenance records into flat rows, aggregates
  seeds (mean +- sd) and writes `results.csv`
- `html.py` renders `index.html` from `templates/index.html.j2`; `build_report` writes both

Every number carries the sha256 of the provenance record of the score file it came from.
Usage: `from retrace.report import build_report; build_report(score_files, out_dir)`;
tests: `PYTHONPATH=src python -m pytest tests/unit/test_report.py`.
"""
from __future__ import annotations

from retrace.report.html import build_report

__all__ = ["build_report"]
