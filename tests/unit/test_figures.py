"""Published figures are outputs: README.md and docs/ agree with their newest result files.

benchmarks/record.py keeps what a measuring command printed; benchmarks/figures.py draws every
marked figure from those files (docs/measurements/figures.yaml). The first test is the guard a
hand-edited number or a forgotten `make figures` trips; the others check the two scripts on
files made here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


figures = load("figures")
record = load("record")


def test_every_published_figure_equals_its_newest_result_file(capsys):
    rc = figures.main(["--check"])
    assert rc == 0, capsys.readouterr()
    # and not vacuously: every figure the spec names is shown somewhere
    shown = {m.group(1) for doc in figures.documents() for m in figures.MARKER.finditer(doc.read_text())}
    specs = yaml.safe_load(figures.SPEC.read_text()) or {}
    assert set(specs) <= shown, f"figures never shown: {sorted(set(specs) - shown)}"


def _result(root: Path, name: str, started: str, values: dict, note: str = "quiet", rc: int = 0):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    rec = {"name": name, "started": started, "rc": rc, "note": note, "commit": "abc", "values": values}
    (folder / f"{started.replace(':', '')}.json").write_text(json.dumps(rec))


SPECS = {
    "total": {"result": "ci", "where": "quiet", "value": "total", "scale": 1 / 60, "format": "{:.1f}"},
    "runs": {
        "result": "ci",
        "table": {
            "last": 2,
            "columns": [{"head": "when", "meta": "started"}, {"head": "s", "value": "total"}],
        },
    },
}


def test_a_figure_is_drawn_from_the_newest_successful_matching_result(tmp_path):
    _result(tmp_path, "ci", "2026-12-01T10:00:00Z", {"total": "600"})
    _result(tmp_path, "ci", "2026-12-02T10:00:00Z", {"total": "900"}, note="beside a burner")
    _result(tmp_path, "ci", "2026-12-03T10:00:00Z", {"total": "120"}, rc=1)
    text = "CI: <!-- figure:total -->99<!-- /figure --> min"
    assert figures.regenerate(text, SPECS, tmp_path) == "CI: <!-- figure:total -->10.0<!-- /figure --> min"
    _result(tmp_path, "ci", "2026-12-04T10:00:00Z", {"total": "780"}, note="quiet, again")
    assert "13.0" in figures.regenerate(text, SPECS, tmp_path)


def test_a_table_lists_the_last_results_newest_first(tmp_path):
    for day, total in (("01", "600"), ("02", "700"), ("03", "800")):
        _result(tmp_path, "ci", f"2026-12-{day}T10:00:00Z", {"total": total})
    table = figures.regenerate("<!-- figure:runs -->\nold\n<!-- /figure -->", SPECS, tmp_path)
    rows = [ln for ln in table.splitlines() if ln.startswith("| 2026")]
    assert rows == ["| 2026-12-03 10:00 | 800 |", "| 2026-12-02 10:00 | 700 |"]


def test_missing_results_values_and_figures_are_named(tmp_path):
    with pytest.raises(figures.FigureError, match="figure total: no result file under .*ci/"):
        figures.regenerate("<!-- figure:total -->x<!-- /figure -->", SPECS, tmp_path)
    _result(tmp_path, "ci", "2026-12-01T10:00:00Z", {"other": "1"})
    with pytest.raises(figures.FigureError, match="printed no 'total'"):
        figures.regenerate("<!-- figure:total -->x<!-- /figure -->", SPECS, tmp_path)
    with pytest.raises(figures.FigureError, match="figure nope: not in"):
        figures.regenerate("<!-- figure:nope -->x<!-- /figure -->", SPECS, tmp_path)


def test_record_keeps_the_printed_values_of_a_successful_command(tmp_path, capsys):
    script = "print('null family false-supported rate (paper): 0.02'); print('noise'); print('x: 1'); print('x: 2')"
    assert record.main(["calib", "--results", str(tmp_path), "--", sys.executable, "-c", script]) == 0
    [path] = (tmp_path / "calib").glob("*.json")
    rec = json.loads(path.read_text())
    assert rec["values"] == {"null family false-supported rate (paper)": "0.02", "x": "2"}
    assert rec["rc"] == 0 and rec["command"][-1] == script and rec["machine"]["cores"]
    assert "null family" in capsys.readouterr().out  # passed through


def test_record_writes_nothing_for_a_failed_command(tmp_path):
    assert (
        record.main(
            [
                "calib",
                "--results",
                str(tmp_path),
                "--",
                sys.executable,
                "-c",
                "print('a: 1'); raise SystemExit(3)",
            ]
        )
        == 3
    )
    assert not (tmp_path / "calib").exists()


def test_the_readme_stays_a_front_door():
    # docs/development/style.md, "Docs: a front door and details": what, why, two commands,
    # reading the output, where next; details in docs/
    text = (figures.ROOT / "README.md").read_text()
    assert len(text) <= 8000, f"README.md is {len(text)} characters (at most 8,000: move details to docs/)"
    assert "make run" in text and "make test" in text


def test_a_pattern_picks_the_figure_out_of_a_printed_line(tmp_path):
    _result(
        tmp_path,
        "estimate",
        "2026-12-01T10:00:00Z",
        {"estimate": "675 jobs, ≈ 5,192.9 GPU-hours (rates assumed)"},
    )
    spec = {
        "hours": {
            "result": "estimate",
            "value": "estimate",
            "pattern": r"≈ ([\d,.]+) GPU-hours",
            "format": "{:,.0f}",
        }
    }
    text = "<!-- figure:hours -->?<!-- /figure -->"
    assert figures.regenerate(text, spec, tmp_path) == "<!-- figure:hours -->5,193<!-- /figure -->"
    spec["hours"]["pattern"] = r"≈ ([\d,.]+) CPU-hours"
    with pytest.raises(figures.FigureError, match="does not match"):
        figures.regenerate(text, spec, tmp_path)


def test_a_table_of_rows_comes_from_the_newest_result_alone(tmp_path):
    _result(tmp_path, "cal", "2026-12-01T10:00:00Z", {"rate (a)": "0.9", "rate (b)": "0.9"})
    _result(tmp_path, "cal", "2026-12-02T10:00:00Z", {"rate (a)": "0.01", "rate (b)": "0.02"})
    spec = {
        "cal": {
            "result": "cal",
            "table": {
                "rows": ["a", "b"],
                "columns": [{"head": "experiment", "item": True}, {"head": "rate", "value": "rate ({row})"}],
            },
        },
        "when": {"result": "cal", "meta": "started"},
    }
    table = figures.regenerate("<!-- figure:cal -->x<!-- /figure -->", spec, tmp_path)
    assert [ln for ln in table.splitlines() if ln.startswith("| a") or ln.startswith("| b")] == [
        "| a | 0.01 |",
        "| b | 0.02 |",
    ]
    assert figures.regenerate("<!-- figure:when -->x<!-- /figure -->", spec, tmp_path) == (
        "<!-- figure:when -->2026-12-02 10:00<!-- /figure -->"
    )


def test_a_column_with_a_default_shows_it_for_an_older_result_that_did_not_print_the_value(tmp_path):
    _result(tmp_path, "ci", "2026-12-01T10:00:00Z", {"total": "600"})
    _result(tmp_path, "ci", "2026-12-02T10:00:00Z", {"total": "700", "pending": "3"})
    cols = [{"head": "total", "value": "total"}, {"head": "pending", "value": "pending", "default": "-"}]
    specs = {"t": {"result": "ci", "table": {"last": 2, "columns": cols}}}
    table = figures.regenerate("<!-- figure:t -->x<!-- /figure -->", specs, tmp_path)
    assert [ln for ln in table.splitlines() if ln.startswith("| 7") or ln.startswith("| 6")] == [
        "| 700 | 3 |",
        "| 600 | - |",
    ]


def test_two_results_started_in_the_same_second_are_both_kept(tmp_path):
    rec = {"name": "mutation", "started": "2026-12-06T03:54:10Z", "values": {"x": "1"}}
    first = record.write(rec, tmp_path)
    second = record.write({**rec, "values": {"x": "2"}}, tmp_path)
    assert first != second and json.loads(first.read_text())["values"] == {"x": "1"}
    assert json.loads(second.read_text())["values"] == {"x": "2"}


def test_a_controls_row_prints_one_parsable_value_per_field_even_with_a_colon_in_its_claim():
    controls = load("controls")
    row = {
        "claim": "positive control: Maj@N beats greedy",
        "verdict": "supported",
        "acc_method": "0.605",
        "acc_baseline": "0.49",
        "delta": "0.115",
        "ci_low": "0.047",
        "ci_high": "0.183",
        "ci_level": "0.975",
        "p_value": "0.00029",
        "p_adjusted": "",
        "wins": "31",
        "ties": "161",
        "losses": "8",
    }
    values = record.parse_values(controls.row_lines(row))
    label = "positive control - Maj@N beats greedy"
    assert values == {
        f"verdict ({label})": "supported",
        f"accuracy ({label})": "0.605 / 0.490",
        f"effect ({label})": "+0.115 [0.047, 0.183] (0.975)",
        f"p ({label})": "0.00029 (Holm -)",
        f"won/tied/lost ({label})": "31/161/8",
    }


def test_a_meta_list_such_as_the_command_is_shown_as_its_words_and_a_pattern_picks_from_them(tmp_path):
    _result(tmp_path, "rehearse", "2026-12-01T10:00:00Z", {"x": "1"})
    path = tmp_path / "rehearse" / "2026-12-01T100000Z.json"
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "command": ["retrace", "rehearse", "--scale", "0.1"]}))
    spec = {"scale": {"result": "rehearse", "meta": "command", "pattern": r"--scale (\S+)"}}
    text = "<!-- figure:scale -->?<!-- /figure -->"
    assert figures.regenerate(text, spec, tmp_path) == "<!-- figure:scale -->0.1<!-- /figure -->"
