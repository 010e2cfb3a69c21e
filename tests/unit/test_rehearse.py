"""`retrace rehearse` (retrace/rehearse.py): planted effects found, null rows not supported."""

from __future__ import annotations

from retrace import rehearse
from retrace.cli import main
from retrace.scoring.claims import PAPER_CLAIMS
from retrace.scoring.design import Design


def design(n: int = 400) -> Design:
    d = Design("toy")
    labels = {"greedy": (3, True), "majority": (3, False), "refine": (3, False), "refine_affirm": (3, False)}
    for model in ("m1", "m2"):
        for dataset in ("a", "b"):
            d.cells[(model, dataset)] = {"n": n, "labels": labels}
            for claim, a, b, direction in PAPER_CLAIMS:
                if a in labels and b in labels:
                    d.rows.append(
                        (claim, model, dataset, a, b, direction, "acc", 1, [(model, dataset)], "plain")
                    )
    return d


def test_planted_rows_are_recovered_and_null_rows_are_not_supported():
    plant = {("refine", "a"): 0.2}
    out = rehearse.rehearse_once(design(), plant, seed=0)
    lines = []
    recovered, planted, false = rehearse.report(out, lines.append)
    assert planted == 2 * 3 and recovered == planted and false == 0  # 2 models x 3 refine rows on "a"
    assert any(line.endswith("yes") and "+20.0" in line for line in lines)


def test_judge_reads_direction_and_null():
    row = {"direction": "less", "verdict": "supported"}
    assert rehearse.judge(row, -0.1) == "yes" and rehearse.judge(row, 0.0) == "NO (false)"
    assert rehearse.judge({"direction": "greater", "verdict": "inconclusive"}, 0.1) == "missed"


def test_power_is_per_planted_row_at_full_size():
    power = rehearse.power(design(300), {("refine", "b"): 0.15}, runs=3, seed=0)
    assert len(power) == 2 * 3 and all(v == 1.0 for v in power.values())


def test_scale_cuts_questions_and_refuses_nonsense():
    import pytest

    assert rehearse.scaled(design(400), 0.1).cells[("m1", "a")]["n"] == 40
    with pytest.raises(ValueError, match="scale"):
        rehearse.scaled(design(), 1.5)


def test_cli_rehearses_the_smoke_experiment(capsys, tmp_path):
    effects = tmp_path / "effects.yaml"
    effects.write_text("effects:\n  - {label: refine, points: 30}\n")
    assert (
        main(
            [
                "rehearse",
                "--experiment",
                "refine_smoke",
                "--scale",
                "1",
                "--effects",
                str(effects),
                "--power-runs",
                "1",
                "--design-only",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED rehearsal of refine_smoke")
    assert "planted effects recovered: 0/10" in out  # 4 questions: too few to support anything
    assert "null rows falsely supported: 0" in out and "jobs: 15 planned" in out
