"""The report's tables are built with pandas now; on a fixture they must equal what the
hand-written code they replaced produced: same CSV columns and cells, same seed aggregates,
same N x D grid, same plot points. The `_old_*` functions are frozen copies of that code
(retrace 3a8b29f, report/tables.py, diagnostics_table.py, plots.py)."""

from __future__ import annotations

import csv
import io
import statistics

import pytest
from test_report import make_score

from retrace.report.diagnostics_table import grid_tables
from retrace.report.plots import method_points
from retrace.report.tables import columns, result_rows, seed_aggregates, write_csv


def _old_write_csv(rows: list[dict]) -> str:
    f = io.StringIO()
    writer = csv.DictWriter(f, fieldnames=columns(rows), restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return f.getvalue()


def _old_seed_aggregates(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["dataset"], row["method"]), []).append(row)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        accs = [m["accuracy"] for m in members]
        first = members[0]
        out.append(
            {
                "model": first["model"],
                "dataset": first["dataset"],
                "method": first["method"],
                "n_seeds": len(members),
                "seeds": [m["seed"] for m in members],
                "accuracy_mean": statistics.fmean(accs),
                "accuracy_sd": statistics.stdev(accs),
                "generated_tokens_mean": statistics.fmean(m["generated_tokens"] for m in members),
                "flops_effective_mean": statistics.fmean(m["flops_effective"] for m in members),
                "prov_sha256s": [m["prov_sha256"] for m in members],
            }
        )
    return out


def _old_grid(grid: list[dict]) -> tuple[list, list]:
    cells = {(c["n"], c["depth"]): c["accuracy"] for c in grid}
    ns, depths = sorted({n for n, _ in cells}), sorted({k for _, k in cells})
    return depths, [{"n": n, "cells": [cells.get((n, k)) for k in depths]} for n in ns]


@pytest.fixture
def rows(tmp_path):
    files = [
        make_score(
            tmp_path, "qwen", "gsm8k", "majority", s, a, maj={"1": {"value": a - 0.1}, "4": {"value": a}}
        )
        for s, a in [(10, 0.5), (2, 0.7), (0, 0.65)]
    ]
    files += [
        make_score(tmp_path, "qwen", "gsm8k", "greedy", 0, 0.55),
        make_score(tmp_path, "smol", "math500", "greedy", "x", 0.1),
        make_score(tmp_path, "smol", "math500", "greedy", 1, 0.3),
    ]
    return result_rows(files)


def test_results_csv_same_columns_and_cells_as_old_code(rows, tmp_path):
    write_csv(tmp_path / "results.csv", rows)
    new = (tmp_path / "results.csv").read_text()
    assert new == _old_write_csv(rows)
    header = new.splitlines()[0].split(",")
    assert header[:4] == ["model", "dataset", "method", "seed"] and "maj@4" in header
    assert [r["seed"] for r in rows[:3]] == [0, 0, 2]  # greedy, then majority seeds numerically


def test_seed_aggregates_equal_old_code(rows):
    new, old = seed_aggregates(rows), _old_seed_aggregates(rows)
    assert [a["method"] for a in new] == [a["method"] for a in old] == ["majority", "greedy"]
    for a, b in zip(new, old):
        assert set(a) == set(b)
        for k in b:
            assert a[k] == (pytest.approx(b[k]) if isinstance(b[k], float) else b[k]), k


def test_grid_pivot_equals_old_code():
    grid = [
        {"n": n, "depth": d, "accuracy": (n + d) / 10} for n in (4, 1, 2) for d in (1, 0) if (n, d) != (2, 1)
    ]  # one absent cell stays None
    diag = {
        "job": {"model": "m", "dataset": "d", "method": "refine", "seed": 0},
        "grid": grid,
        "prov_sha256": "p",
        "file": "f",
    }
    (table,) = grid_tables([diag])
    depths, old_rows = _old_grid(grid)
    assert table["depths"] == depths and table["rows"] == old_rows
    assert old_rows[1] == {"n": 2, "cells": [0.2, None]}


def test_plot_points_equal_old_code(rows):
    points = {(p["dataset"], p["model"], p["method"]): p for p in method_points(rows)}
    maj = points[("gsm8k", "qwen", "majority")]
    assert maj["n_seeds"] == 3 and maj["accuracy"] == pytest.approx((0.5 + 0.7 + 0.65) / 3)
    assert (maj["ci_low"], maj["ci_high"]) == (pytest.approx(0.4), pytest.approx(0.8))
    assert maj["tflops"] == pytest.approx(2 * 10**9 * 5500 / 1e12)


def test_extra_columns_are_written_not_dropped(rows, tmp_path):
    """A key another stage adds to the rows (e.g. an answer-source rate) reaches the CSV,
    before the token/FLOPs/hash tail, and the HTML's details."""
    rows = [dict(r, answer_source_rate=0.25 * i) for i, r in enumerate(rows)]
    write_csv(tmp_path / "results.csv", rows)
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    assert header.index("pass@1") < header.index("answer_source_rate") < header.index("prompt_tokens")
    from retrace.report.html import render_html

    html = render_html(rows, [], images={})
    assert "answer_source_rate 0.250" in html


def test_claims_csv_same_cells_as_the_csv_module_wrote():
    """claims.csv is written with pandas too: the same header and cells as the DictWriter
    it replaced (evidence joined with ';', unknown keys left out, None empty)."""
    from retrace.scoring.claims import COLUMNS, write_claims_csv

    rows = [
        {c: None for c in COLUMNS}
        | {
            "claim": "beats greedy",
            "delta": 0.125,
            "p_value": 9.765625e-04,
            "verdict": "supported",
            "evidence": ["ab", "cd"],
            "not_a_column": 1,
        },
        {c: None for c in COLUMNS} | {"claim": 'a "quoted", claim', "delta": -0.1, "evidence": []},
    ]
    old = io.StringIO()
    writer = csv.DictWriter(old, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({**r, "evidence": ";".join(r.get("evidence") or ())})
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "claims.csv"
        write_claims_csv(rows, path)
        new = path.read_text()
    assert list(csv.reader(io.StringIO(new))) == list(csv.reader(io.StringIO(old.getvalue())))
