"""The vLLM backend's engine thread (retrace.backends.vllm.EngineLoop) on a scripted engine.

No vLLM needed: the fake has LLMEngine's step / has_unfinished_requests / abort_request and
finishes each request after the number of steps it was given, so the tests can check that a
request submitted while others run joins them at the next step (no wave barrier), that an
engine error reaches every Future in flight and every later one, and that close never hangs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from retrace.backends.base import BackendError
from retrace.backends.vllm import EngineLoop


@dataclass
class Out:
    request_id: str
    finished: bool
    text: str


class ScriptedEngine:
    """Each request runs `steps` engine steps; `fail_at`: the step number that raises."""

    def __init__(self, fail_at: int | None = None, step_s: float = 0.002):
        self.left: dict[str, int] = {}
        self.batches: list[set[str]] = []  # the requests of each step
        self.aborted: list[str] = []
        self.fail_at, self.step_s, self.counter = fail_at, step_s, 0
        self.thread_ids: set[int] = set()

    def add(self, name: str, steps: int) -> str:
        self.thread_ids.add(threading.get_ident())
        self.counter += 1
        rid = f"{self.counter}-{name}"  # vLLM's internal id: the external one plus a suffix
        self.left[rid] = steps
        return rid

    def has_unfinished_requests(self) -> bool:
        return bool(self.left)

    def step(self) -> list[Out]:
        self.thread_ids.add(threading.get_ident())
        if self.fail_at is not None and len(self.batches) + 1 >= self.fail_at:
            raise RuntimeError("EngineDeadError: worker died")
        time.sleep(self.step_s)
        self.batches.append({rid.split("-", 1)[1] for rid in self.left})
        outs = []
        for rid in list(self.left):
            self.left[rid] -= 1
            if self.left[rid] == 0:
                del self.left[rid]
                outs.append(Out(rid.split("-", 1)[0], True, rid.split("-", 1)[1]))
        return outs

    def abort_request(self, ids, internal=False):
        self.aborted += ids
        for rid in ids:
            self.left.pop(rid, None)


def put(loop: EngineLoop, engine: ScriptedEngine, name: str, steps: int):
    return loop.put(lambda: engine.add(name, steps), lambda out: out.text.upper(), name)


def test_a_request_submitted_mid_run_joins_the_running_batch_and_finishes_first():
    engine = ScriptedEngine()
    loop = EngineLoop(engine)
    try:
        long = put(loop, engine, "long", 200)
        while not engine.batches:
            time.sleep(0.001)
        short = put(loop, engine, "short", 2)
        assert short.result(timeout=10) == "SHORT"
        assert not long.done()  # the short one did not wait for the long one's "wave"
        assert long.result(timeout=10) == "LONG"
    finally:
        loop.close()
    assert {"long", "short"} in engine.batches  # stepped together: it joined between two steps
    assert engine.thread_ids == {loop.thread.ident}  # one thread owns the engine
    assert not loop.thread.is_alive()


def test_an_engine_error_fails_every_pending_future_and_every_later_one():
    engine = ScriptedEngine(fail_at=3)
    loop = EngineLoop(engine)
    futures = [put(loop, engine, f"r{i}", 50) for i in range(4)]
    for f in futures:
        with pytest.raises(BackendError, match="EngineDeadError"):
            f.result(timeout=10)
    later = put(loop, engine, "later", 1)
    with pytest.raises(BackendError, match="not run: engine failed"):
        later.result(timeout=1)
    loop.close()
    assert not loop.thread.is_alive()


def test_a_request_the_engine_refuses_fails_alone():
    engine = ScriptedEngine()
    loop = EngineLoop(engine)

    def refuse():
        raise ValueError("prompt longer than max_model_len")

    try:
        bad = loop.put(refuse, lambda out: out, "bad")
        good = put(loop, engine, "good", 3)
        with pytest.raises(BackendError, match="tag='bad'.*max_model_len"):
            bad.result(timeout=10)
        assert good.result(timeout=10) == "GOOD"
    finally:
        loop.close()


def test_close_fails_requests_in_flight_aborts_them_and_returns():
    engine = ScriptedEngine(step_s=0.01)
    loop = EngineLoop(engine)
    endless = put(loop, engine, "endless", 10**9)
    while not engine.batches:
        time.sleep(0.001)
    start = time.perf_counter()
    loop.close(timeout=10)
    assert time.perf_counter() - start < 5 and not loop.thread.is_alive()
    with pytest.raises(BackendError, match="closed"):
        endless.result(timeout=1)
    assert engine.aborted == ["1-endless"]
    with pytest.raises(BackendError, match="closed"):
        put(loop, engine, "after", 1).result(timeout=1)
    loop.close()  # idempotent


def test_a_call_runs_on_the_engine_thread_once_nothing_is_in_flight():
    engine = ScriptedEngine()
    loop = EngineLoop(engine)
    try:
        running = put(loop, engine, "running", 20)
        seen = loop.call(lambda: (running.done(), threading.get_ident()))
        assert seen == (True, loop.thread.ident)
    finally:
        loop.close()
