"""ART on retrace.engine.scheduler: each program is its own task (generate a segment, run its tool,
resume), so a program moves on without waiting for the others' segments; the requests and
rows are those of the round-based runner it replaced."""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import Future

import pytest
from art_scenario import run_all, without_latency
from fake_backend import manifest
from test_scheduler import wait_for

from retrace.art.runner import ProgramRunner
from retrace.backends.scripted import ScriptedBackend
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from retrace.tools._interface import Tool, ToolOutput

PREFIX = "Description: demo\nInput: d\nQ1: [EOQ]\nAns: d\n----\n"


class Gated(ScriptedBackend):
    """The scripted engine in async mode, except that a request whose prompt holds `gate`
    waits until the test opens it: "slow" by construction, not by timing."""

    def __init__(self, engine: dict, gate: str):
        super().__init__(manifest(), {**engine, "async": True})
        self.gate, self.gated, self.submitted = gate, [], []

    def submit(self, request):
        self.submitted.append(request)
        if self.gate not in request.prompt:
            return super().submit(request)
        future = Future()
        self.gated.append((future, request))
        return future

    def open(self) -> None:
        for future, request in self.gated:
            if not future.done():
                future.set_result(self._complete(request))


class Search(Tool):
    def __call__(self, call):
        return ToolOutput(f"FACT<{call.instruction}>")


def test_a_program_resumes_after_its_tool_without_waiting_for_a_slow_segment(tmp_path):
    script = {
        "FACT<fast fact>": " [EOQ]\nAns: fast-ans",
        "Input: fast": " [search] fast fact\n#1: x",
        "Input: slow": " [EOQ]\nAns: slow-ans",
    }
    engine = Gated({"script": script}, gate="Input: slow")
    llm = CachedLLM(lambda: engine, "scripted", manifest(), RequestCache(tmp_path / "c", job="t"))
    heads = ["Description: d\nInput: slow", "Description: d\nInput: fast"]
    out = []
    worker = threading.Thread(
        target=lambda: out.append(ProgramRunner(llm, {"search": Search()}).run(PREFIX, heads))
    )
    worker.start()
    try:
        # fast's first segment came back, its tool ran, and its resumed segment went to the
        # engine while slow's first segment is still running (no round barrier)
        wait_for(lambda: any("#1: FACT<fast fact>\nQ2:" in r.prompt for r in engine.submitted), limit=2000)
        assert [f.done() for f, _ in engine.gated] == [False]
    finally:
        engine.open()
        worker.join(timeout=60)
    slow, fast = out[0]
    assert (slow.answer, fast.answer) == ("slow-ans", "fast-ans")
    assert [c["output"] for c in fast.tool_calls] == ["FACT<fast fact>"] and not slow.tool_calls


def digest(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True).encode()).hexdigest()


# The scenario run by the round-based runner (every active program of a round in one
# generate call, tools between rounds; commit 794b60d) on the synchronous scripted engine:
# requests sent, digest of their sorted (tag, cache key) pairs, digest of the rows.
ROUND_BASED = (
    88,
    "47f8b61d9e043418eaae65d741c7e6cf382928e8a18e629296648ae1dcc988c7",
    "c4e46f574cbad849bb0d3fc6d29a08e9844481ffa375143d8e079583f9c8cff8",
)


def test_requests_and_rows_are_those_of_the_round_based_runner(tmp_path, monkeypatch):
    """Every ART method and AutoCoT, on a synchronous engine (waves) and on an async one
    (requests finish out of order): the same requests (tags, cache keys) and the same rows
    as the round-based code, byte for byte (latencies aside)."""
    got = {}
    for mode, engine in (("wave", {"batch_size": 3}), ("async", {"async": True})):
        rows, keys = run_all(tmp_path / mode, engine, monkeypatch)
        got[mode] = (without_latency(rows), keys)
    assert got["async"] == got["wave"]
    rows, keys = got["async"]
    assert (len(keys), digest(keys), digest(rows)) == ROUND_BASED


@pytest.mark.slow
def test_per_program_and_round_barrier_schedules_give_identical_art_rows(
    tmp_path, llamacpp_smollm2_det, smollm2_manifest
):
    """Deterministic mode on SmolLM2: ART programs as tasks (each segment, and each `code
    generate` request, submitted as its program is ready) reproduce the round-barrier
    schedule (waves) byte for byte. Self-consistency: two sampled programs, seeds of their own."""
    from art_scenario import context
    from test_refine import _Waves

    from retrace.art.baselines import METHOD_FNS
    from retrace.util.records import Problem

    demo = (
        "Description: Add the numbers.\nInput: What is 2 plus 3?\nQ1: [code generate] Add 2 and 3.\n"
        "#1:\nans = 2 + 3\nprint(ans)\nQ2: [code execute] Run #1.\n#2: 5\nQ3: [EOQ]\nAns: 5"
    )
    rows = {}
    for name, engine in (("per_program", llamacpp_smollm2_det), ("barrier", _Waves(llamacpp_smollm2_det))):
        llm = CachedLLM(lambda: engine, "llamacpp", smollm2_manifest, RequestCache(tmp_path / name))
        ctx = context(llm, [Problem("a", "What is 46 plus 27?", "73")], [], max_steps=2, segment_tokens=16)
        ctx.demos = [demo]
        rows[name] = without_latency(METHOD_FNS["art_sc"](ctx))
    assert rows["per_program"] == rows["barrier"]
    traces = rows["barrier"][0]["traces"]
    assert all(t["tool_calls"] and len(t["segments"]) > 1 for t in traces)  # paused, ran a tool, resumed
    assert len({s["text"] for t in traces for s in t["segments"]}) > 1  # real, varied text
