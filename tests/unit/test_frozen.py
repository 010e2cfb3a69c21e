"""retrace.util.frozen: the shared job config (retrace.planning.plan.job_config) refuses changes, and reads,
hashes and copies exactly as the plain config does."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from retrace.config.compose import check_global
from retrace.planning import plan
from retrace.util.frozen import freeze, thaw
from retrace.util.hashing import sha256_json


@pytest.fixture(scope="module")
def job():
    return next(j for j in plan.jobs(check_global({"experiment": "smoke"})) if j.method == "refine")


def test_the_shared_job_config_refuses_every_change(job):
    cfg = plan.job_config(job)
    changes = [
        lambda: cfg.__setitem__("x", 1),
        lambda: cfg["method"].update(n=8),
        lambda: cfg["method"].pop("name"),
        lambda: cfg.setdefault("y", {}),
        lambda: cfg["model"].clear(),
    ]
    changes += [lambda: freeze({"a": [1]})["a"].append(2), lambda: freeze([[1]])[0].sort()]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert plan.job_config(job) == job.config()  # nothing changed


def test_it_reads_hashes_and_keys_as_the_plain_config(job):
    plain, frozen = job.config(), plan.job_config(job)
    assert frozen == plain and isinstance(frozen["method"], dict)
    assert json.dumps(frozen, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert sha256_json(frozen) == sha256_json(plain)
    for stage in ("generate", "score", "diagnose"):
        assert plan.rerun_key(stage, frozen) == plan.rerun_key(stage, plain)


def test_copies_are_the_callers_own(job):
    frozen = plan.job_config(job)
    for mine in (copy.deepcopy(frozen), pickle.loads(pickle.dumps(frozen)), thaw(frozen)):
        mine["method"]["n"] = 99  # a plain dict again
        assert type(mine) is dict and frozen["method"].get("n") != 99
