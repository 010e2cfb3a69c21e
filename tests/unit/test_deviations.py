"""The deviations register (retrace/deviations/*.yaml): its switches exist, the papers'
references name what the experiments run, `retrace deviations` prints it, `retrace plan
--check` refuses a broken one, and the report shows it beside "paper vs ours"."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from retrace import deviations
from retrace.config.compose import CONFIG_DIR, load_experiment
from retrace.report.paper import NUMBERS

REGISTERS = ("paper", "drr_paper", "art_paper")


def _value(data, dotted: str):
    for part in dotted.split("."):
        data = data[part]
    return data


def test_every_paper_experiment_has_a_register_naming_its_paper():
    assert deviations.experiments() == sorted(REGISTERS)
    papers = yaml.safe_load(NUMBERS.read_text())["papers"]
    for name in REGISTERS:
        reg = deviations.load(name)
        assert reg["experiment"] == name and reg["paper"] in papers
        assert len(reg["deviations"]) >= 5


@pytest.mark.parametrize("name", REGISTERS)
def test_every_switch_names_a_key_that_exists_in_the_configs(name):
    """Read from the YAML files themselves, not through deviations' own checker: a dotted key,
    or (in an experiment file) the key of an override its runs set."""
    for d in deviations.load(name)["deviations"]:
        sw = d["switch"]
        if sw and sw["file"].startswith("config/experiment/") and sw["key"].startswith("method."):
            assert f"{sw['key']}=" in (CONFIG_DIR / sw["file"].removeprefix("config/")).read_text()
        elif sw:
            data = yaml.safe_load((CONFIG_DIR / sw["file"].removeprefix("config/")).read_text())
            _value(data, sw["key"])  # KeyError names the missing key


@pytest.mark.parametrize("name", REGISTERS)
def test_the_papers_references_name_models_and_datasets_the_experiment_runs(name):
    exp = load_experiment(name)
    assert deviations.problems(name, exp, CONFIG_DIR, NUMBERS) == []


def test_every_issue_item_is_in_a_register():
    """The differences a reviewer found (issue 41's "Why") each have an entry."""
    ids = {n: {d["id"] for d in deviations.load(n)["deviations"]} for n in REGISTERS}
    assert {
        "refine-history",
        "math7b-depth",
        "rm-verifier",
        "search-scorer",
        "qwen1.5b-variant",
        "math7b-variant",
    } <= ids["paper"]
    assert {
        "abstention-accuracy",
        "dm-loss-weighting",
        "sft-lora-parameters",
        "train-splits",
        "overall-size",
    } <= ids["drr_paper"]
    assert {
        "task-averaged",
        "autocot-selection",
        "autocot-22-points",
        "models",
        "search-tool",
        "task-sets",
    } <= ids["art_paper"]


def test_paper_yaml_runs_the_switches_it_registers_as_fixed():
    """A `fixed` entry's switch holds the paper's value where the experiment runs it."""
    import json

    from retrace.config.compose import check_global
    from retrace.planning.plan import jobs

    planned = jobs(check_global({"experiment": "paper"}))
    refine = [j.config()["method"] for j in planned if j.method == "refine" and j.label != "refine_full"]
    assert refine and {m["history"] for m in refine} == {"latest"} and {m["depth"] for m in refine} == {4}
    math7b = [j for j in planned if j.model == "qwen2.5-math-7b" and j.method == "refine"]
    assert {j.config()["method"]["depth"] for j in math7b} == {4}
    assert json.dumps(deviations.load("paper")).count("latest") >= 2


def test_cli_prints_one_deviation_line_each(capsys):
    from retrace.cli import main

    assert main(["deviations", "--experiment", "drr_paper"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(deviations.load("drr_paper")["deviations"])
    assert all(line.startswith("deviation: [") for line in out)
    assert any(
        "sft-lora-parameters" in line and "3,407,872" in line and "783,150,080" in line for line in out
    )


PAPER = yaml.safe_dump(deviations.load("paper"))  # the real register, read before any monkeypatch


def _broken(tmp_path: Path, entry: dict) -> Path:
    reg = yaml.safe_load(PAPER)
    reg["deviations"].append(entry)
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(reg))
    return tmp_path


def test_a_switch_that_does_not_exist_is_one_line_naming_file_and_key(tmp_path, monkeypatch):
    entry = {
        "id": "x",
        "area": "a",
        "ours": "o",
        "status": "switchable",
        "verdict": "no",
        "switch": {"file": "config/method/refine.yaml", "key": "histroy", "paper": "latest"},
    }
    monkeypatch.setattr(deviations, "HERE", _broken(tmp_path, entry))
    [(where, why)] = deviations.switch_problems("paper", CONFIG_DIR)
    n = len(deviations.load("paper")["deviations"]) - 1
    assert where.endswith(f"paper.yaml: deviations[{n}] (x).switch") and str(tmp_path) in where
    assert why == "key 'histroy' does not exist in config/method/refine.yaml"
    entry["switch"]["file"] = "config/method/nothing.yaml"
    monkeypatch.setattr(deviations, "HERE", _broken(tmp_path, entry))
    assert (
        deviations.switch_problems("paper", CONFIG_DIR)[0][1]
        == "file config/method/nothing.yaml does not exist"
    )


def test_a_reference_to_a_model_the_experiment_does_not_run_fails_the_check(tmp_path):
    numbers = yaml.safe_load(NUMBERS.read_text())
    ref = numbers["claims"][0]["refs"][0]
    ref["model"], ref["dataset"] = "qwen2.5-math-7b-instruct", "gsm8k"
    (tmp_path / "n.yaml").write_text(yaml.safe_dump(numbers))
    problems = deviations.reference_problems("refine", load_experiment("paper"), tmp_path / "n.yaml")
    assert [w.split(": ", 1)[1] for w, _ in problems] == [
        "claims[0] ('beats greedy').refs[0].model",
        "claims[0] ('beats greedy').refs[0].dataset",
    ]
    assert problems[0][1].startswith("qwen2.5-math-7b-instruct is not a model the experiment runs")
    assert problems[1][1] == "gsm8k is not a dataset the experiment runs"


def test_plan_check_fails_on_a_broken_register(tmp_path, monkeypatch, capsys):
    """End to end through `retrace plan --check` (the real paper experiment, one bad switch)."""
    from retrace.cli import main

    entry = {
        "id": "x",
        "area": "a",
        "ours": "o",
        "status": "switchable",
        "verdict": "no",
        "switch": {"file": "config/method/refine.yaml", "key": "histroy", "paper": "latest"},
    }
    monkeypatch.setattr(deviations, "HERE", _broken(tmp_path, entry))
    assert main(["plan", "--experiment", "paper", "--check"]) == 1
    fails = [line for line in capsys.readouterr().out.splitlines() if "FAIL" in line]
    n = len(deviations.load("paper")["deviations"]) - 1
    assert fails == [
        f"check: FAIL {tmp_path / 'paper.yaml'}: deviations[{n}] (x).switch: "
        "key 'histroy' does not exist in config/method/refine.yaml"
    ]


def test_the_report_shows_a_register_only_for_runs_on_its_experiments_models():
    from retrace.report.html import render_html

    row = {
        "claim": "beats greedy",
        "model": "qwen2.5-1.5b-instruct",
        "dataset": "math500",
        "method": "refine",
        "baseline": "greedy",
        "delta": 0.1,
        "ci_low": 0.0,
        "ci_high": 0.2,
        "p_value": 0.01,
        "verdict": "inconclusive",
        "n_questions": 500,
        "wins": 1,
        "ties": 1,
        "losses": 0,
        "evidence": [],
    }
    page = render_html([], [], claims=[row])
    assert "Where this run differs from the paper (paper)" in page and "refinement conditioning" in page
    assert "The paper's headline claims and what tests them (paper)" in page and "wtl-counts" in page
    smoke = render_html([], [], claims=[{**row, "model": "qwen2.5-coder-0.5b-q4km"}])
    assert "Where this run differs" not in smoke


@pytest.mark.parametrize("name", REGISTERS)
def test_the_shipped_registers_pass_the_check_by_effect(name, capsys):
    from retrace.cli import main

    assert main(["deviations", "--experiment", name, "--check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"check: ok register of {name} (0 problems)"


def _entry(switch: dict, status: str = "switchable") -> dict:
    return {"id": "x", "area": "a", "ours": "o", "status": status, "verdict": "yes", "switch": switch}


def test_a_switch_at_a_key_the_experiment_overrides_fails_the_check(tmp_path, monkeypatch, capsys):
    """config/method/refine.yaml's history exists, but paper.yaml sets method.history in every
    refinement label: setting the file's key changes no resolved job, and the check says so."""
    from retrace.cli import main

    switch = {"file": "config/method/refine.yaml", "key": "history", "paper": "latest"}
    monkeypatch.setattr(deviations, "HERE", _broken(tmp_path, _entry(switch)))
    [(where, why)] = deviations.switch_problems("paper", CONFIG_DIR)
    assert where.endswith("(x).switch")
    assert why == "config/method/refine.yaml: history='latest' changes no resolved job of paper"
    assert main(["deviations", "--experiment", "paper", "--check"]) == 1
    assert "changes no resolved job" in capsys.readouterr().out


def test_a_fixed_switch_must_hold_the_papers_value_and_govern(tmp_path, monkeypatch):
    """status fixed: `paper` must change nothing (the experiment runs it), `ours` must change
    some job; the override switch with an unknown key or a value of another kind is one line."""
    from retrace.deviations.effect import entry_problem, resolved_jobs

    base = resolved_jobs("paper", CONFIG_DIR)
    labels = ["refine"]
    ok = {
        "file": "config/experiment/paper.yaml",
        "key": "method.depth",
        "paper": 4,
        "ours": 2,
        "labels": labels,
    }
    assert entry_problem("paper", _entry(ok, "fixed"), CONFIG_DIR, base) is None
    wrong = {**ok, "paper": 3}  # not what the experiment runs
    assert "status fixed, but" in entry_problem("paper", _entry(wrong, "fixed"), CONFIG_DIR, base)
    idle = {**ok, "key": "method.history", "paper": "latest", "ours": "latest"}
    assert entry_problem("paper", _entry(idle, "fixed"), CONFIG_DIR, base).endswith(
        "changes no resolved job of paper"
    )
    bad_kind = {**ok, "paper": "n/a"}
    assert "is not a value of the key" in entry_problem("paper", _entry(bad_kind), CONFIG_DIR, base)
    unknown = {**ok, "key": "method.dpeth"}
    assert entry_problem("paper", _entry(unknown), CONFIG_DIR, base) == (
        "key 'method.dpeth' does not exist in config/experiment/paper.yaml"
    )


def test_no_switch_names_a_value_that_does_not_exist():
    """The issue's three: RM-32B (never released), a DRR train fraction 'n/a', history at refine.yaml."""
    for name in REGISTERS:
        for d in deviations.load(name)["deviations"]:
            sw = d["switch"] or {}
            assert "never released" not in str(sw.get("paper")) and "n/a" not in str(sw.get("paper"))
            assert (sw.get("file"), sw.get("key")) != ("config/method/refine.yaml", "history")


def test_drr_register_lists_none_of_the_above_scoring(capsys):
    from retrace.cli import main

    assert main(["deviations", "--experiment", "drr_paper"]) == 0
    [nota] = [line for line in capsys.readouterr().out.splitlines() if "nota-scoring" in line]
    assert "none of the above" in nota and "nota=abstain" in nota and "can change a verdict: yes" in nota
