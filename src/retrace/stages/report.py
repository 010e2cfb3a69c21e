"""Stage `report`: the results table (HTML + CSV) over every score file, with provenance.

    python -m retrace report --out-dir results/report results/scores/.../seed0.json ...
"""
from __future__ import annotations

from pathlib import Path

from retrace.plan import stage_sources
from retrace.provenance import Provenance
from retrace.report.html import build_report


def run(score_files: list[Path], out_dir: Path) -> None:
    provs = {name: Provenance("report", {}, stage_sources("report"), inputs=[str(p) for p in score_files])
             for name in ("results.csv", "index.html")}
    build_report(score_files, out_dir)
    for name, prov in provs.items():
        prov.write(out_dir / name)
