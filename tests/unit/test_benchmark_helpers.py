"""Helpers of the scripts in benchmarks/ that print measured numbers."""

from __future__ import annotations

import dataclasses
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


def test_raw_chains_submit_each_rollouts_next_request_after_its_previous():
    """Each chain starts at once, each next request waits for its own previous one and carries
    that reply where the warm-up's stood (so the engine's KV reuse matches the pipeline's)."""
    pytest.importorskip("xllamacpp")
    from fake_backend import chat, manifest

    from retrace.backends.scripted import ScriptedBackend
    from retrace.util.records import Message

    bench = load("pipeline_vs_engine")
    engine = ScriptedBackend(manifest(), {"script": ["one two three"], "async": True})
    submitted, finished, sent = [], [], {}
    submit = engine.submit

    def tracking(request):
        submitted.append((request.tag, list(finished)))
        sent[request.tag] = request
        future = submit(request)
        future.add_done_callback(lambda f: finished.append(request.tag))
        return future

    def follow(request, warm_reply: str, tag: str):
        """`tag`'s request: `request`'s history, the warm-up's reply to it, a new user turn."""
        messages = (*request.messages, Message("assistant", warm_reply), Message("user", tag))
        return dataclasses.replace(request, messages=messages, tag=tag)

    engine.submit = tracking
    a1, c1 = chat("a1"), chat("c1")
    a2 = follow(a1, "warm a1", "a2")
    a3 = follow(a2, "warm a2", "a3")
    chains = [
        [(a1, "warm a1"), (a2, "warm a2"), (a3, "warm a3")],
        [(chat("b1"), "warm b1")],
        [(c1, "warm c1"), (follow(c1, "warm c1", "c2"), "warm c2")],
    ]
    tokens, seconds, prompt, cached = bench.raw_chains(engine, chains)
    assert tokens == 6 * 3 and seconds >= 0 and prompt > 0 and cached == 0
    seen = dict(submitted)
    assert [t for t, _ in submitted[:3]] == ["a1", "b1", "c1"]  # every chain starts at once
    assert "a1" in seen["a2"] and "a2" in seen["a3"] and "c1" in seen["c2"]  # then each waits for its own
    replies = [m.content for m in sent["a3"].messages if m.role == "assistant"]
    assert replies == ["one two three", "one two three"]  # this run's replies, not "warm a1/a2"
    assert [m.content for m in sent["a3"].messages if m.role == "user"] == ["a1", "a2", "a3"]


def test_planner_cold_runs_drop_the_kept_sizing_before_each_run_and_report_the_least(
    tmp_path, monkeypatch, capsys
):
    ps = load("planner_scale")
    kept = tmp_path / ".snakemake" / "retrace"
    timings = iter([(3199, 16.0, 15.9), (3199, 14.2, 14.1), (3199, 19.5, 19.0)])
    seen = []

    def fake_dry_run(work, name):
        seen.append(kept.exists())  # a cold run finds no sizing kept by the one before
        kept.mkdir(parents=True, exist_ok=True)
        return next(timings)

    monkeypatch.setattr(ps, "dry_run", fake_dry_run)
    assert ps.timed_runs(tmp_path, "paper_x10", "paper x10", 3) == (3199, 14.2, 14.1)
    assert seen == [False, False, False]
    out = capsys.readouterr().out
    assert "paper x10 runs: 3, seconds: least 14.2, median 16.0, most 19.5" in out


def test_planner_runs_again_keep_the_sizing_the_cold_runs_kept(tmp_path, monkeypatch):
    ps = load("planner_scale")
    kept = tmp_path / ".snakemake" / "retrace"
    kept.mkdir(parents=True)
    seen = []
    monkeypatch.setattr(ps, "dry_run", lambda work, name: seen.append(kept.exists()) or (1, 2.0, 2.0))
    ps.timed_runs(tmp_path, "paper_x10", "paper x10 again", 2, cold=False)
    assert seen == [True, True]
