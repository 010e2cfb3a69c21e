"""retrace.scheduler: per-rollout tasks keep the engine fed without changing any output.

Deterministic tests only: a custom engine whose Futures the test completes by hand (so
"a rollout moved on before a slow one finished" is asserted by construction, not by timing),
and the scripted engine in async mode against its synchronous mode."""
from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest

from fake_backend import chat, manifest, method_cfg, scripted_llm, smoke_math_problems
from retrace.backends.base import Backend, BackendError
from retrace.cache import RequestCache
from retrace.llm import CachedLLM
from retrace.records import Completion


class HandEngine(Backend):
    """Every submitted request waits until the test finishes it (`finish(tag)`)."""
    name = "hand"

    def __init__(self):
        super().__init__(manifest(), {})
        self.pending: dict[str, Future] = {}
        self.submitted: list[str] = []

    def generate(self, requests):  # pragma: no cover - the scheduler uses submit here
        raise AssertionError("a submit-capable engine must not get waves")

    def submit(self, request):
        future = Future()
        self.pending[request.tag] = future
        self.submitted.append(request.tag)
        return future

    def finish(self, tag: str, text: str | None = None, error: bool = False) -> None:
        future = self.pending.pop(tag)
        if error:
            future.set_exception(BackendError(f"engine failed on {tag}"))
        else:
            future.set_result(Completion(text=text or f"out:{tag}", finish_reason="stop",
                                         prompt_tokens=1, generated_tokens=1))


def hand_llm(tmp_path: Path, engine: HandEngine) -> CachedLLM:
    return CachedLLM(lambda: engine, "hand", manifest(), RequestCache(tmp_path / "c", job="t"))


def two_turns(name: str):
    first = yield chat(f"{name}-1")
    second = yield chat(f"{name}-2 after {first.text}")
    return [first.text, second.text]


def test_a_rollout_moves_on_without_waiting_for_a_slow_one(tmp_path):
    engine = HandEngine()
    llm = hand_llm(tmp_path, engine)
    # The engine finishes fast's first turn while slow's is still running: fast's second turn
    # must be submitted then (no turn barrier), before slow's first turn comes back.
    import threading
    order = []

    def drive():
        order.append(llm.run_tasks([two_turns("slow"), two_turns("fast")]))
    worker = threading.Thread(target=drive)
    worker.start()
    wait_for(lambda: set(engine.pending) == {"slow-1", "fast-1"})
    engine.finish("fast-1")
    wait_for(lambda: "fast-2 after out:fast-1" in engine.pending)
    assert "slow-1" in engine.pending            # still running: fast did not wait for it
    engine.finish("fast-2 after out:fast-1")
    engine.finish("slow-1")
    wait_for(lambda: "slow-2 after out:slow-1" in engine.pending)
    engine.finish("slow-2 after out:slow-1")
    worker.join(timeout=60)
    assert order == [[["out:slow-1", "out:slow-2 after out:slow-1"],
                      ["out:fast-1", "out:fast-2 after out:fast-1"]]]   # results in task order


def wait_for(condition, limit: int = 6000) -> None:
    """Poll a condition another thread makes true (bounded; a hang fails, never flakes)."""
    import time
    for _ in range(limit):
        if condition():
            return
        time.sleep(0.005)
    raise AssertionError("condition not reached")


def test_each_completion_is_committed_and_an_engine_error_keeps_the_finished(tmp_path):
    engine = HandEngine()
    llm = hand_llm(tmp_path, engine)
    import threading
    errors = []

    def drive():
        try:
            llm.generate([chat("a"), chat("b"), chat("c")])
        except BackendError as e:
            errors.append(str(e))
    worker = threading.Thread(target=drive)
    worker.start()
    wait_for(lambda: set(engine.pending) == {"a", "b", "c"})
    engine.finish("a")
    wait_for(lambda: llm.cache.get_many([llm.key(chat("a"))]) != {})  # in the cache at once
    engine.finish("c")
    engine.finish("b", error=True)
    worker.join(timeout=60)
    assert errors == ["engine failed on b"]
    kept = llm.cache.get_many([llm.key(chat(t)) for t in "abc"])
    assert sorted(c.text for c in kept.values()) == ["out:a", "out:c"]   # nothing finished is lost


def test_identical_requests_in_flight_are_generated_once(tmp_path):
    engine = HandEngine()
    llm = hand_llm(tmp_path, engine)
    import threading
    out = []
    worker = threading.Thread(target=lambda: out.append(llm.generate([chat("x"), chat("x"), chat("y")])))
    worker.start()
    wait_for(lambda: set(engine.pending) == {"x", "y"})
    engine.finish("x")
    engine.finish("y")
    worker.join(timeout=60)
    assert engine.submitted == ["x", "y"] and [c.text for c in out[0]] == ["out:x", "out:x", "out:y"]


@pytest.mark.parametrize("critic", ["model", "affirm", "random", "none"])
def test_refinement_gives_the_same_rows_and_requests_on_async_and_wave_engines(tmp_path, critic):
    """Sample once, score many: the scheduler's path (Futures finishing out of order, or
    synchronous waves) must not change a single request or row."""
    from retrace.methods.base import MethodContext
    from retrace.registry import METHODS, TASKS
    from test_refine import SCRIPT
    problems = smoke_math_problems(2)
    rows, seen = {}, {}
    for mode in ("wave", "async"):
        engine = {**SCRIPT, "batch_size": 3, **({"async": True} if mode == "async" else {})}
        llm, engines = scripted_llm(tmp_path / mode, engine)
        ctx = MethodContext(seed=7, task=TASKS.get("smoke_math"), template="math_cot.j2")
        rows[mode] = METHODS.get("refine")(problems, method_cfg("refine", n=3, depth=2, critic=critic), llm, ctx)
        seen[mode] = sorted(llm.key(r) for e in engines for r in e.requests_seen)
    assert rows["async"] == rows["wave"] and seen["async"] == seen["wave"] and seen["wave"]
