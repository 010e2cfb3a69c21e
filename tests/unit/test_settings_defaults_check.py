"""The settings-defaults check of `make lint` (.ci/settings_defaults.py) on made-up sources: it
must find a literal default written into a `.get` on a settings object however the settings
are reached, leave absent-markers and non-settings dicts alone, and fail on a site beyond its
allow-list and on an allow-list line whose site is gone."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "settings_defaults.py"

SOURCE = """
def run(cfg, row, self):
    scoring = cfg["method"].get("scoring") or {}
    n_boot = int(scoring.get("n_boot", 2000))
    t = cfg["method"]["sampling"].get("temperature", 1.0)
    ctx = self.engine.get("n_ctx", 4096)
    name = (cfg.get("scorer") or {}).get("name", "llm_judge")
    k = judge_cfg.get("k", -1)
    stops = cfg.get("stop", ["\\\\n"])
    plain = cfg.get("engine"), cfg.get("x", None), cfg.get("engine", {}), cfg.get("stop", [])
    rows = row.get("n", 1), row.get("extra", {"a": 1})

    def inner(settings):
        return settings.get("top_k", 1)
"""


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("settings_defaults", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_literal_defaults_on_settings_are_found_however_the_settings_are_reached(check):
    assert sorted(check.sites(SOURCE, "m.py")) == [
        "m.py:inner top_k=1",
        "m.py:run k=-1",
        "m.py:run n_boot=2000",
        "m.py:run n_ctx=4096",
        "m.py:run name='llm_judge'",
        "m.py:run stop=['\\\\n']",
        "m.py:run temperature=1.0",
    ]


def test_a_site_beyond_the_allow_list_and_a_stale_line_each_fail_in_one_line(check):
    found = Counter(["a.py:run n_boot=2000", "a.py:run n_boot=2000", "b.py:f k=1"])
    allow = Counter(["a.py:run n_boot=2000", "c.py:g gone=0", "b.py:f k=1"])
    assert check.problems(found, allow) == [
        "src/a.py:run: .get(n_boot, 2000) writes a setting's default into the code: put it in the YAML "
        "(config/) and read the key plainly",
        ".ci/settings_defaults.txt: c.py:g gone=0 is gone from the code: delete the line",
    ]
    assert check.problems(found, found) == []


def test_the_allow_list_holds_only_sites_of_the_tree(check):
    # the list only shrinks: every line names a site the scan finds (lint fails on the others)
    assert set(check.allowed()) <= set(check.all_sites())
