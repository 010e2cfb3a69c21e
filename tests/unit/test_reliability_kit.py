"""The reliability suite compares what a result is, not how it was produced: two runs of the same
requests (one by the engine, one from the request cache) must compare equal, whatever timing or
cache counter a record type gains (benchmarks/reliability_kit.py, records.MEASURED)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from fake_backend import chat, scripted_llm

from retrace.llm import Usage
from retrace.records import Completion, measured_fields

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import reliability_kit as kit

SCRIPT = {"apples": "I count seven apples", "eggs": "thirty eggs"}


def result_of(llm, reqs) -> dict:
    """What a generation job writes about these requests: the samples and its usage."""
    done = llm.generate(reqs)
    return {"samples": [c.to_dict() for c in done], "generation_usage": dataclasses.asdict(llm.usage)}


def test_an_engine_run_and_a_cached_rerun_compare_equal(tmp_path):
    reqs = [chat("apples?"), chat("eggs?")]
    fresh, _ = scripted_llm(tmp_path, {"script": SCRIPT})
    first = result_of(fresh, reqs)
    again, engines = scripted_llm(fresh.cache, {"script": SCRIPT})
    second = result_of(again, reqs)
    assert not engines  # the rerun was served entirely by the cache: timings and counters differ
    assert first != second
    assert kit._scrub(first) == kit._scrub(second)


def test_the_comparison_keeps_what_a_result_is():
    kept = {f.name for f in dataclasses.fields(Completion)} - kit.VOLATILE
    assert {"text", "finish_reason", "prompt_tokens", "generated_tokens", "key"} <= kept
    usage = {f.name for f in dataclasses.fields(Usage)} - kit.VOLATILE
    assert {"requests", "prompt_tokens_all", "generated_tokens_all"} <= usage


def test_every_timing_or_engine_counter_is_marked_measured():
    """A new `*_seconds` or `engine_*` field must carry records.MEASURED, or reliability
    comparisons of two equal runs would differ on it."""
    for t in (Completion, Usage):
        for f in dataclasses.fields(t):
            timing = f.name.endswith(("_s", "_seconds", "seconds")) or f.name.startswith(
                ("engine_", "cache_")
            )
            assert not timing or f.name in measured_fields(t), f"{t.__name__}.{f.name} is not MEASURED"
