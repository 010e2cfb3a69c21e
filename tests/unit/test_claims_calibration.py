"""A small run of benchmarks/claims_calibration.py: the real claims code on simulated outcomes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from retrace.scoring import claims as claims_mod

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "claims_calibration.py"


@pytest.fixture(scope="module")
def cal():
    spec = importlib.util.spec_from_file_location("claims_calibration", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODELS = ("m1", "m2")
DATASETS = {"small": 30, "large": 200}


def test_null_experiments_rarely_read_supported(cal):
    # 2 models x 2 datasets x every paper claim: ~40 rows per experiment. Under the old
    # CI-only rule nearly every null experiment had a false "supported" row.
    rate, n_rows = cal.null_rate(24, [0, 1], MODELS, DATASETS, n_boot=300)
    assert n_rows >= 2 * 2 * len(claims_mod.PAPER_CLAIMS)
    assert rate <= 0.1


def test_ci_only_rule_would_fail_the_same_null(cal, monkeypatch):
    # the same simulation with the exact test switched off: the calibration must detect it
    monkeypatch.setattr(claims_mod, "holm", lambda ps: [0.0] * len(ps))
    rate, _ = cal.null_rate(8, [0], MODELS, DATASETS, n_boot=300)
    assert rate >= 0.5


def test_planted_effect_is_found(cal):
    # +10 points on 200 questions, 3 seeds: the planted rows are mostly supported
    assert cal.power(6, [0, 1], MODELS, DATASETS, n_boot=300, dataset="large") >= 0.5


def test_simulated_null_methods_share_difficulty_and_differ_in_draws(cal):
    runs, flops = cal.simulate(np.random.default_rng(0), ("m",), {"d": 50})
    cell = runs[("m", "sim", "d")]
    assert len(cell["refine"]) == cal.SEEDS and cell["refine"][0][0] != cell["majority"][0][0]
    assert set(cell) == set(cal.labels())
