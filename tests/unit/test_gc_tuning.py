"""retrace.util.gc_tuning: fewer full collections while a large structure grows, nothing lowered."""

from __future__ import annotations

import gc
import sys

import pytest

from retrace.util import gc_tuning


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def full_collections_while_growing(n: int) -> int:
    """Full collections the collector runs while n long-lived containers are built and kept,
    as a DAG grows."""
    full = []

    def count(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.collect()
    gc.callbacks.append(count)
    try:
        kept = [{"job": i, "files": [str(i)]} for i in range(n)]
    finally:
        gc.callbacks.remove(count)
    del kept
    return len(full)


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
    sys.version_info >= (3, 14), reason="3.14's incremental collector reads the thresholds otherwise"
)
def test_a_growing_structure_gets_far_fewer_full_collections(thresholds):
    gc.set_threshold(700, 10, 10)
    default = full_collections_while_growing(400_000)
    gc_tuning.for_planning()
    tuned = full_collections_while_growing(400_000)
    assert default >= 4  # the passes the tuning is for
    assert tuned <= default // 3
