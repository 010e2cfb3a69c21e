"""The experiment's sizing is computed once per experiment and inputs (retrace.planning.sized_cache):
a second parse reads it, any change to what it is computed from computes it again (issue 57.2).

    .venv/bin/python -m pytest -q tests/unit/test_sized_cache.py
"""

from __future__ import annotations

import json

import pytest

from retrace.planning import parts, plan, sized_cache
from retrace.planning.cluster import Limit


@pytest.fixture
def jobs():
    return plan.jobs({"experiment": "refine_smoke"})


def shape(s: parts.Sized) -> list:
    return [(p.part.path, p.minutes(), p.gpus) for p in s.parts] + [
        b.as_dict(s.limit.minutes) for b in s.labels
    ]


def test_a_second_parse_reads_the_sizing_the_first_computed(jobs, tmp_path, monkeypatch):
    probe, cache = tmp_path / "probe", tmp_path / "cache"
    first = sized_cache.cached_sized(jobs, None, (), probe, Limit(1440, 4), cache)
    assert shape(first) == shape(parts.sized(jobs, None, (), probe, Limit(1440, 4)))
    assert len(list(cache.glob("sized-*.pickle"))) == 1
    monkeypatch.setattr(sized_cache, "sized", lambda *a: pytest.fail("sized again"))
    assert shape(sized_cache.cached_sized(jobs, None, (), probe, Limit(1440, 4), cache)) == shape(first)


def test_a_probe_result_a_limit_or_other_jobs_size_again(jobs, tmp_path):
    probe, cache = tmp_path / "probe", tmp_path / "cache"
    key = sized_cache.sizing_key(jobs, None, (), probe, Limit(1440, 4))
    assert sized_cache.sizing_key(jobs, None, (), probe, Limit(60, 4)) != key
    assert sized_cache.sizing_key(jobs[1:], None, (), probe, Limit(1440, 4)) != key
    (probe / jobs[0].model).mkdir(parents=True)
    (probe / jobs[0].model / f"{jobs[0].backend}.json").write_text(json.dumps({"tok_s": 5.0}))
    measured = sized_cache.sizing_key(jobs, None, (), probe, Limit(1440, 4))
    assert measured != key
    sized = sized_cache.cached_sized(jobs, None, (), probe, Limit(1440, 4), cache)
    assert any(b.rates == "measured by probe" for b in sized.labels)


def test_an_unreadable_cache_file_is_computed_again(jobs, tmp_path):
    probe, cache = tmp_path / "probe", tmp_path / "cache"
    key = sized_cache.sizing_key(jobs, None, (), probe, Limit())
    cache.mkdir()
    (cache / f"sized-{key[:32]}.pickle").write_bytes(b"not a pickle")
    assert shape(sized_cache.cached_sized(jobs, None, (), probe, Limit(), cache)) == shape(
        parts.sized(jobs, None, (), probe, Limit())
    )


def test_only_the_newest_sizings_are_kept(jobs, tmp_path):
    probe, cache = tmp_path / "probe", tmp_path / "cache"
    for minutes in range(60, 60 + sized_cache.KEEP + 2):
        sized_cache.cached_sized(jobs, None, (), probe, Limit(minutes, 4), cache)
    assert len(list(cache.glob("sized-*.pickle"))) == sized_cache.KEEP
