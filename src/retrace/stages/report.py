"""Stage `report`: results table (HTML + CSV), claims and refinement diagnostics, plots.

    python -m retrace report --out-dir results/report [--claims results/report/claims.csv] \
        [--diagnostics D.json ...] [--section S.json ...] results/scores/.../seed0/<label>.json ...
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrace.planning.plan import stage_sources
from retrace.report.html import build_report
from retrace.store.provenance import Provenance


def run(
    score_files: list[Path],
    out_dir: Path,
    claims: Path | None = None,
    diagnostics: Sequence[Path] = (),
    sections: Sequence[Path] = (),
    probes: Sequence[Path] = (),
) -> None:
    inputs = (
        [str(p) for p in score_files]
        + ([str(claims)] if claims else [])
        + [str(p) for p in diagnostics]
        + [str(p) for p in sections]
        + [str(p) for p in probes]
    )
    prov = Provenance("report", {}, stage_sources("report"), inputs=inputs)
    for written in build_report(
        score_files, out_dir, claims_csv=claims, diagnostics=diagnostics, sections=sections, probes=probes
    ):
        prov.write(written)
