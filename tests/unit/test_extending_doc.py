"""The method example of docs/development/extending.md, run as written: its code registers a
new name (the old example registered "greedy" again, a duplicate-name error), its config keeps
Maj@N's sampling block (so its rollouts are Maj@N's cache hits), and its rows keep the chosen
contract, so scoring counts the chosen sample, not the vote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from fake_backend import method_cfg, scripted_llm, smoke_math_problems

import retrace.util.registry as registry
from retrace.config.settings import method_settings
from retrace.methods.base import MethodContext
from retrace.scoring.score import score_generations
from retrace.util.registry import METHODS, TASKS

DOC = Path(__file__).resolve().parents[2] / "docs" / "development" / "extending.md"


def blocks(language: str) -> list[str]:
    """The fenced blocks of one language in the doc's method section, de-indented."""
    text = DOC.read_text().split("## A method, end to end")[1].split("## A task")[0]
    found = re.findall(rf"^( *)```{language}\n(.*?)^\1```", text, flags=re.S | re.M)
    return [re.sub(rf"^{indent}", "", body, flags=re.M) for indent, body in found]


@pytest.fixture()
def example(monkeypatch):
    """The example's `run`, registered in a fresh registry (the real one stays as it is)."""
    METHODS.names()  # the real methods imported (and registered) before the swap
    fresh = registry.Registry(METHODS.kind, METHODS.package, METHODS.shape)
    fresh._discovered = True  # holds the example alone
    monkeypatch.setattr(registry, "METHODS", fresh)
    namespace: dict = {"__name__": "retrace.methods.first_answered"}
    exec(compile(blocks("python")[0], str(DOC), "exec"), namespace)
    assert fresh.names() == ["first_answered"] and "first_answered" not in METHODS.names()
    return fresh.get("first_answered")


def test_the_example_config_shares_majority_sampling_and_keys():
    config = yaml.safe_load(blocks("yaml")[0])
    majority = method_cfg("majority")
    assert config["name"] == "first_answered" and set(config) == set(majority)
    assert config["sampling"] == majority["sampling"] and config["scoring"] == majority["scoring"]


def test_the_example_chooses_in_every_row_and_is_scored_by_its_choice(tmp_path, example):
    problems = smoke_math_problems(3)
    # sample 0 of every problem has no answer; the rest do, so the choice is never sample 0
    script = {"seeded": False, "script": ["no idea", "so the answer is \\boxed{1}", "\\boxed{2}"]}
    llm, _ = scripted_llm(tmp_path, script)
    ctx = MethodContext(seed=0, task=TASKS.get("smoke_math"), template="math_cot.j2")
    settings = method_settings({**yaml.safe_load(blocks("yaml")[0]), "n": 3}, "first_answered.yaml")
    rows = example(problems, settings, llm, ctx)
    assert [r["extra"]["chosen"] for r in rows] == [1, 1, 1]
    score = score_generations(rows, {p.id: p for p in problems}, TASKS.get("smoke_math"), params=1, n_boot=10)
    assert score["selection"] == "chosen by scorer"
    assert example.calls_per_problem({"n": 3}) == 3
