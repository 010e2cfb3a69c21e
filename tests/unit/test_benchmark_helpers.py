"""Helpers of the scripts in benchmarks/ that print measured numbers."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_twice_counts_sample_set_rollouts_the_engine_ran_again():
    pytest.importorskip("xllamacpp")
    bench = load("refine_prefix_cache")
    # 3 problems, N=2 -> N'=5: 15 requests; a working cache serves 6, the engine runs 9
    assert bench.generated_twice(SimpleNamespace(requests=15, cache_hits=6), 2, 5, 3) == 0
    # a cache that served nothing: the 6 stored rollouts were generated again
    assert bench.generated_twice(SimpleNamespace(requests=15, cache_hits=0), 2, 5, 3) == 6
