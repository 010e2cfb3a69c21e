"""A fourth method family, registered from this test alone (docs/development/extending.md): the
core iterates over retrace.config.families.FAMILIES, so the toy family's block is accepted, and it gets its
estimate line, its runtimes checked against the partition limit, its plan checks, its claims,
its CLI command and its report section without a line of core code knowing it."""

from __future__ import annotations

import json

import pytest

from retrace import cli
from retrace.config import experiment
from retrace.config.compose import ConfigError, check_global, load_experiment
from retrace.config.families import FAMILIES, Context, Family
from retrace.planning import cluster, estimate, plan, preflight
from retrace.planning.cluster import OverLimit

TOY_CLAIM = "toy beats greedy"


class Toy(Family):
    """Jobs are `rounds` engine jobs per model, each generating `tokens` tokens."""

    block = "toy"
    order = 90
    summary = "Toy (this test)"

    def engine_jobs(self, ctx: Context) -> list[tuple[str, int]]:
        b = ctx.block(self)
        return [(f"{m}/round{r}", int(b["tokens"])) for m in b["models"] for r in range(int(b["rounds"]))]

    def methods(self) -> tuple[str, ...]:
        return ("toy",)

    def estimate_lines(self, ctx: Context) -> list[str]:
        est = estimate.FamilyEstimate("toy")
        for where, tokens in self.engine_jobs(ctx):
            est.add(where.split("/")[0], ctx.block(self)["backend"], tokens, None)
        return [est.line()]

    def runtimes(self, ctx: Context) -> list:
        return [
            OverLimit("toy_round", where, tokens // 100, resumes=False)
            for where, tokens in self.engine_jobs(ctx)
        ]

    def config_checks(self, ctx: Context) -> list[tuple[str, str]]:
        b = ctx.block(self)
        return [("toy:rounds", f"{b['rounds']} rounds > 3")] if int(b["rounds"]) > 3 else []

    def data_checks(self, ctx: Context, notes: list[str]) -> list[tuple[str, str]]:
        notes.append(f"toy: {len(self.engine_jobs(ctx))} jobs checked")
        return []

    def claim_names(self) -> set[str]:
        return {TOY_CLAIM}

    def commands(self) -> dict:
        return {"toy": lambda argv: len(argv)}


@pytest.fixture
def toy(monkeypatch):
    """The toy family registered, and an experiment (the plumbing runs) with a `toy:` block."""
    FAMILIES.register("toy")(Toy)
    exp = {**load_experiment("plumbing"), "toy": {"models": ["smollm2-135m-q40"], "backend": "llamacpp"}}
    exp["toy"].update(rounds=4, tokens=120_000)
    monkeypatch.setattr(plan, "load_experiment", lambda name: exp)  # plan.jobs and the checks read it
    yield exp
    FAMILIES.unregister("toy")


def test_its_block_is_a_valid_experiment_key_and_a_typo_is_still_refused(toy):
    assert experiment.check(toy, "toy.yaml") is toy
    with pytest.raises(ConfigError, match="toyy"):
        experiment.check({**toy, "toyy": {}}, "toy.yaml")


def test_it_gets_an_estimate_line(toy):
    (line,) = estimate.family_lines(toy, None)
    assert line.startswith("estimate (toy): 4 engine jobs, ≤ 480,000 generated tokens")


def test_its_jobs_are_checked_against_the_partition_limit(toy):
    over = cluster.over_limit(check_global({"experiment": "plumbing"}), 1000)
    assert [(o.rule, o.where) for o in over if o.rule == "toy_round"] == [
        ("toy_round", f"smollm2-135m-q40/round{r}") for r in range(4)
    ]
    assert cluster.over_limit(check_global({"experiment": "plumbing"}), 2000) == []


def test_it_gets_a_plan_check(toy):
    notes: list[str] = []
    problems = preflight.check(check_global({"experiment": "plumbing"}), notes)
    assert problems == [("toy:rounds", "4 rounds > 3")] and "toy: 4 jobs checked" in notes


def test_its_claims_and_command_and_methods_are_known(toy, capsys):
    from retrace.app.catalog import family_methods
    from retrace.scoring.preregistered import known_claims

    assert TOY_CLAIM in known_claims()
    assert cli.main(["toy", "a", "b"]) == 2
    assert ("toy: block", "Toy (this test): toy") in family_methods()
    with pytest.raises(SystemExit):  # the overview lists it among the internal steps
        cli.main(["--help"])
    assert "toy …" in capsys.readouterr().out


def test_its_report_section_renders_in_the_report(toy, tmp_path):
    """A family's section is a JSON file its own stage writes (report/sections.py's form); the
    report renders any such file, so the toy's appears without the report knowing the toy."""
    from retrace.report.html import render_html
    from retrace.report.sections import load_sections

    section = tmp_path / "toy.json"
    table = {"caption": "rounds", "columns": ["round", "accuracy"], "rows": [[0, 0.5], [1, 0.75]]}
    section.write_text(json.dumps({"title": "Toy: rounds", "tables": [table]}))
    sections, _ = load_sections([section], tmp_path)
    html = render_html([], [], images={"accuracy_vs_compute": "a.png"}, sections=sections)
    assert '<h2 id="toy-rounds">Toy: rounds</h2>' in html and "0.750" in html


class ToyKeys(Toy):
    """The toy with rerun-key inputs, registered only by the test below: closure.modules is
    cached per process (after the scan has found every family), so it is cleared around it."""

    def data_files(self) -> dict[str, list[str]]:
        return {"retrace.report.sections": ["__init__.py"]}  # any file beside a module will do

    def unhashed_modules(self) -> dict[str, str]:
        return {"retrace.report.tables": "the toy's claim (this test) that its edits rerun nothing"}


def test_its_rerun_key_inputs_reach_the_closure():
    """Its data files join the keys of code that imports their module; its unhashed modules are
    neither hashed nor followed — closure.py names no family for either."""
    from retrace.planning import closure

    closure.modules.cache_clear()
    FAMILIES.register("toy_keys")(ToyKeys)
    try:
        init = closure.SRC / "retrace" / "report" / "__init__.py"
        assert init in closure.data_files(["retrace.report.sections"])
        assert "retrace.report.tables" in closure.modules(("retrace.report.html",), exclude=False)
        assert "retrace.report.tables" not in closure.modules(("retrace.report.html",))
    finally:
        FAMILIES.unregister("toy_keys")
        closure.modules.cache_clear()
    assert "retrace.report.tables" in closure.modules(("retrace.report.html",))
    assert init not in closure.data_files(["retrace.report.sections"])


def test_unregistered_it_is_gone(toy):
    FAMILIES.unregister("toy")
    assert estimate.family_lines(toy, None) == []
    with pytest.raises(ConfigError, match="toy"):
        experiment.check(toy, "toy.yaml")
