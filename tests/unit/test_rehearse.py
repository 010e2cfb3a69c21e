"""`retrace rehearse` (retrace/app/rehearse.py): planted effects found, null rows not supported."""

from __future__ import annotations

from retrace.app import rehearse
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
    counts = rehearse.report(out, lines.append)
    # 2 models x 3 refine rows on "a"
    assert counts["planted"] == 2 * 3 and counts["recovered"] == counts["planted"]
    assert counts["false_supported"] == counts["false_contradicted"] == counts["wrong_sign"] == 0
    assert any(line.endswith("yes") and "+20.0" in line for line in lines)


def test_judge_reads_direction_and_null_and_counts_every_wrong_verdict():
    row = {"direction": "less", "verdict": "supported"}
    assert rehearse.judge(row, -0.1) == "yes" and rehearse.judge(row, 0.0) == "NO (false supported)"
    assert rehearse.judge({"direction": "greater", "verdict": "inconclusive"}, 0.1) == "missed"
    # a planted row read the other way is a wrong sign, never "missed"
    assert rehearse.judge({"direction": "greater", "verdict": "contradicted"}, 0.1) == "wrong sign"
    assert rehearse.judge(row, 0.1) == "wrong sign"  # "less" claim, positive truth, read supported
    null = {"direction": "greater", "verdict": "contradicted"}
    assert rehearse.judge(null, 0.0) == "NO (false contradicted)"
    lines = []
    counts = rehearse.report([({"claim": "c", "model": "m", "dataset": "d", **null}, 0.0)] * 2, lines.append)
    assert counts["false_contradicted"] == 2 and counts["false_supported"] == 0
    counts = rehearse.report([({"claim": "c", "model": "m", "dataset": "d", **null}, 0.1)], lines.append)
    assert counts["wrong_sign"] == 1 and counts["recovered"] == 0


def test_power_is_per_planted_row_at_full_size():
    power, runs, error = rehearse.power(design(300), {("refine", "b"): 0.15}, runs=3, seed=0)
    assert len(power) == 2 * 3 and all(v == 1.0 for v in power.values()) and runs == 3
    assert error == rehearse.mc_error(3, 3) > 0.03  # 3 runs cannot bound the error


def test_power_runs_until_its_monte_carlo_error_is_at_most_003():
    # rows short of power 1 need more than the first batch for one standard error <= 0.03
    power, runs, error = rehearse.power(design(60), {("refine", "b"): 0.06}, runs=None, seed=1)
    assert error <= 0.03 and runs > rehearse.BATCH and min(power.values()) < 0.95
    assert all(rehearse.mc_error(round(p * runs), runs) <= 0.03 for p in power.values())
    assert rehearse.mc_error(10, 20) > 0.03  # 20 runs at 0.5 would not do


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
    assert "null rows falsely contradicted: 0" in out and "planted rows with the wrong sign: 0" in out
    assert "(1 runs each; Monte-Carlo error <= " in out


def test_a_smoke_experiment_without_planted_rows_gets_a_power_summary(capsys):
    # config/rehearse/effects.yaml plants refine on math500 and olympiadbench only: nothing on
    # refine_smoke's rows. Power is then stated for +10 points on each row's method.
    argv = ["rehearse", "--experiment", "refine_smoke", "--design-only", "--scale", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "power at +10 points on each row's method" in out
    lines = [x for x in out.splitlines() if x.startswith("power at full n")]
    assert len(lines) >= 8 and all(": 0.00 " in x for x in lines)  # 4 questions: never enough
    summary = out.splitlines()[-1]
    assert summary.startswith("planted effects detected with power >= 0.9 at full n: 0/")
    error = float(summary.rsplit("<= ", 1)[1].rstrip(")"))
    assert error <= 0.03


def test_the_workflow_rehearsal_derives_a_simulated_copy_of_the_experiment(tmp_path):
    import pytest

    from retrace.app import rehearse_workflow
    from retrace.util.yamlfile import load_yaml

    root = rehearse_workflow.derive("paper", 0.1, rehearse.EFFECTS, tmp_path / "run")
    config = root / "config"
    exp = load_yaml(config / "experiment" / "paper.yaml")
    assert {run["backend"] for run in exp["runs"]} == {"simulated"}
    overrides = [o for run in exp["runs"] for o in run["overrides"]]
    overrides += [
        o for run in exp["runs"] for m in run["methods"] if isinstance(m, dict) for o in m["overrides"]
    ]
    assert not any(
        o.startswith("backend.") and "effects" not in o and "tokens_mean" not in o for o in overrides
    )
    assert load_yaml(config / "model" / "llama-3.1-8b-instruct.yaml")["source"] == {"kind": "simulated"}
    assert load_yaml(config / "dataset" / "math500.yaml")["limit"] == 50
    assert load_yaml(config / "method" / "best_of_n_prm.yaml")["scorer"]["name"] == "llm_judge"
    glob = load_yaml(config / "config.yaml")
    assert glob["experiment"] == "paper" and glob["probe"] is False and str(root) in glob["request_cache"]
    assert (root / "Snakefile").resolve() == (rehearse_workflow.REPO / "Snakefile").resolve()
    assert (
        load_yaml(rehearse_workflow.CONFIG_DIR / "experiment" / "paper.yaml")["runs"][0]["backend"] == "vllm"
    )
    art = rehearse_workflow.derive("art_paper", 0.1, rehearse.EFFECTS, tmp_path / "art") / "config"
    block = load_yaml(art / "experiment" / "art_paper.yaml")["art"]
    assert block["backend"] == "simulated" and block["examples"] == 10 and block["overrides"] == []
    assert block["pool"] == 10  # the held-out pool is a method setting: kept
    # ART splits its tasks' data itself: those datasets stay whole (the spine run shares them)
    assert load_yaml(art / "dataset" / "mmlu_astronomy.yaml")["limit"] is None
    effects = tmp_path / "per_task.yaml"
    effects.write_text("effects:\n  - {label: art, points: 10, datasets: [arithmetic]}\n")
    with pytest.raises(ValueError, match="pool their tasks"):
        rehearse_workflow.derive("art_paper", 0.1, effects, tmp_path / "art2")


def test_row_truth_is_method_minus_baseline_and_gain_minus_gain():
    from retrace.app.rehearse_workflow import row_truth

    effects = [{"label": "refine", "points": 10, "models": ["weak"]}, {"label": "refine", "points": 4}]
    row = {"model": "weak", "dataset": "d", "method": "refine", "baseline": "greedy"}
    assert row_truth(row, effects) == 0.14
    assert row_truth({**row, "method": "refine_affirm"}, effects) == 0.0
    assert row_truth({**row, "model": "weak vs strong", "baseline": "majority"}, effects) == 0.10


def test_power_lines_name_each_rows_family_and_count_them_apart():
    from retrace.scoring.claims import Primary

    d = design(300)
    d.primary = Primary(("beats greedy",), 0.04, ("a",))
    powers = {("beats greedy", "m1", "a", 0.1): 0.95, ("beats Maj@N", "m1", "a", 0.1): 0.5}
    lines = []
    rehearse.print_power(d, powers, runs=20, write=lines.append)
    assert "[primary] beats greedy / m1 / a" in lines[1] and "[exploratory] beats Maj@N" in lines[0]
    assert lines[-1].endswith("primary claims 1/1, exploratory rows 0/1 (20 runs each)")


def test_each_paper_experiments_primary_claims_detect_planted_10_points_at_full_n():
    """The shipped paper experiments pre-register primary claims that their own design can
    confirm: every planted +10-point primary row at power >= 0.9 (config/rehearse/effects.yaml,
    the dataset configs' question counts). Rows left exploratory are the ones too small to confirm."""
    from retrace.scoring.design import design as experiment_design

    for name in ("drr_paper", "art_paper"):  # question counts from the dataset configs: no mirror needed
        d = experiment_design(name)
        powers, _, _ = rehearse.power(d, rehearse.planted(d, rehearse.EFFECTS), runs=10, seed=0)
        primary = {k: p for k, p in powers.items() if {"claim": k[0], "dataset": k[2]} in d.primary}
        # every planted primary row (effects.yaml plants ART's variants alike, so some
        # ART comparisons are null): DRR's 15 Overall rows, ART's 4 planted comparisons
        assert len(primary) >= {"drr_paper": 15, "art_paper": 4}[name], name
        assert min(primary.values()) >= 0.9, (name, {k: p for k, p in primary.items() if p < 0.9})
