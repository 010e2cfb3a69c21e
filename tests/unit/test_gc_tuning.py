"""retrace.util.gc_tuning: fewer full collections while a large structure grows, nothing lowered."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrace.util import gc_tuning

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


# Counted in a fresh interpreter: how often the collector runs a full pass depends on how many
# long-lived objects the process already holds (a test session holds many).
GROWING = """
import gc, sys
from retrace.util import gc_tuning
gc.set_threshold(700, 10, 10)
if sys.argv[1] == "tuned":
    gc_tuning.for_planning()
full = []
gc.callbacks.append(lambda phase, info: full.append(1) if phase == "start" and info["generation"] == 2 else None)
kept = [{"job": i, "files": [str(i)]} for i in range(400_000)]  # long-lived, as a DAG's jobs
print(len(full))
"""


def full_collections_while_growing(mode: str) -> int:
    """Full collections while 400,000 long-lived containers are built and kept, as a DAG grows."""
    out = subprocess.run(
        [sys.executable, "-c", GROWING, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    return int(out.stdout)


def test_defaults_are_raised_to_the_planning_thresholds(thresholds):
    gc.set_threshold(700, 10, 10)
    assert gc_tuning.for_planning() == (700, 10, 10)
    assert gc.get_threshold() == gc_tuning.PLANNING


def test_thresholds_already_higher_are_kept(thresholds):
    gc.set_threshold(200_000, 30, 30)  # e.g. a user's own tuning, as mypy's
    gc_tuning.for_planning()
    assert gc.get_threshold() == (200_000, 30, 100)


def test_a_collector_switched_off_by_threshold_zero_stays_off(thresholds):
    gc.set_threshold(0, 10, 10)
    gc_tuning.for_planning()
    assert gc.get_threshold()[0] == 0


@pytest.mark.skipif(
    sys.version_info >= (3, 14),
    reason="[PYTHON] 3.14's incremental collector reads the thresholds otherwise",
)
def test_a_growing_structure_gets_far_fewer_full_collections():
    default = full_collections_while_growing("default")
    tuned = full_collections_while_growing("tuned")
    assert default >= 4  # the passes the tuning is for
    assert tuned <= default // 3
