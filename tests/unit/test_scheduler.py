"""retrace.engine.scheduler: per-rollout tasks keep the engine fed without changing any output.

Deterministic tests only: a custom engine whose Futures the test completes by hand (so
"a rollout moved on before a slow one finished" is asserted by construction, not by timing),
and the scripted engine in async mode against its synchronous mode."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest
from fake_backend import chat, manifest, method_cfg, scripted_llm, smoke_math_problems

from retrace.backends.base import Backend, BackendError
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from retrace.util.records import Completion


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
            future.set_result(
                Completion(
                    text=text or f"out:{tag}", finish_reason="stop", prompt_tokens=1, generated_tokens=1
                )
            )


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
    assert "slow-1" in engine.pending  # still running: fast did not wait for it
    engine.finish("fast-2 after out:fast-1")
    engine.finish("slow-1")
    wait_for(lambda: "slow-2 after out:slow-1" in engine.pending)
    engine.finish("slow-2 after out:slow-1")
    worker.join(timeout=60)
    assert order == [
        [["out:slow-1", "out:slow-2 after out:slow-1"], ["out:fast-1", "out:fast-2 after out:fast-1"]]
    ]  # results in task order


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
    assert sorted(c.text for c in kept.values()) == ["out:a", "out:c"]  # nothing finished is lost


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


def fan_out(name: str):
    """A fan-out of three, then one request built from their texts in order."""
    texts = [c.text for c in (yield [chat(f"{name}-{m}", sample_index=i) for i, m in enumerate("abc")])]
    last = yield chat(f"{name} after {' '.join(texts)}")
    return texts + [last.text]


def run_in_thread(run):
    """Start `run()` in a thread; returns (thread, list that receives its result)."""
    import threading

    out = []
    worker = threading.Thread(target=lambda: out.append(run()))
    worker.start()
    return worker, out


def test_a_fan_out_is_answered_in_order_once_all_of_it_is_back(tmp_path):
    engine = HandEngine()
    llm = hand_llm(tmp_path, engine)
    worker, out = run_in_thread(lambda: llm.run_tasks([fan_out("x")]))
    wait_for(lambda: set(engine.pending) == {"x-a", "x-b", "x-c"})
    engine.finish("x-c")
    engine.finish("x-a")
    wait_for(lambda: llm.cache.get_many([llm.key(chat("x-a"))]) != {})  # committed at once
    assert set(engine.pending) == {"x-b"}  # the task waits for its whole fan-out
    engine.finish("x-b")
    wait_for(lambda: "x after out:x-a out:x-b out:x-c" in engine.pending)  # in request order
    engine.finish("x after out:x-a out:x-b out:x-c")
    worker.join(timeout=60)
    assert out == [[["out:x-a", "out:x-b", "out:x-c", "out:x after out:x-a out:x-b out:x-c"]]]


def test_a_fan_out_mixes_cache_hits_shared_and_generated_members(tmp_path):
    engine = HandEngine()
    llm = hand_llm(tmp_path, engine)
    llm.store([(llm.key(chat("a")), chat("a"), Completion("cached:a", "stop", 1, 1))])

    def task():
        return (yield [chat("a"), chat("b"), chat("b"), chat("c"), chat("a")])

    worker, out = run_in_thread(lambda: llm.run_tasks([task(), task()]))
    wait_for(lambda: set(engine.pending) == {"b", "c"})
    engine.finish("c")
    engine.finish("b")
    worker.join(timeout=60)
    expected = ["cached:a", "out:b", "out:b", "out:c", "cached:a"]
    assert [[c.text for c in result] for result in out[0]] == [expected, expected]
    assert engine.submitted == ["b", "c"]  # each key generated once for both tasks
    assert llm.usage.requests == 10 and llm.usage.cache_hits == 4


def test_an_empty_fan_out_is_answered_at_once(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": ["x"]})

    def task():
        nothing = yield []
        return nothing, (yield chat("q")).text

    assert llm.run_tasks([task()]) == [([], "x")]


def test_fan_outs_on_async_and_wave_engines(tmp_path):
    """The same results either way, and those of plain `generate` calls; a synchronous engine
    gets every task's fan-out in one wave (one `generate` call per round of the tasks)."""
    script = {"seeded": True, "script": [f"t{i}" for i in range(5)]}
    runs = {}
    for mode, engine in (("async", {"async": True}), ("wave", {"batch_size": 100})):
        llm, engines = scripted_llm(tmp_path / mode, {**script, **engine})
        runs[mode] = llm.run_tasks([fan_out("p"), fan_out("q")]), engines[0]
    reference, _ = scripted_llm(tmp_path / "ref", script)
    texts = [
        c.text for c in reference.generate([chat(f"p-{m}", sample_index=i) for i, m in enumerate("abc")])
    ]
    [last] = reference.generate([chat(f"p after {' '.join(texts)}")])
    assert runs["async"][0] == runs["wave"][0] and runs["wave"][0][0] == texts + [last.text]
    assert len(set(texts)) > 1  # the members' order is visible
    wave = runs["wave"][1]
    assert wave.calls == 2 and [r.tag for r in wave.requests_seen[:6]] == [
        "p-a",
        "p-b",
        "p-c",
        "q-a",
        "q-b",
        "q-c",
    ]


@pytest.mark.parametrize("critic", ["model", "affirm", "random", "none"])
def test_refinement_gives_the_same_rows_and_requests_on_async_and_wave_engines(tmp_path, critic):
    """Sample once, score many: the scheduler's path (Futures finishing out of order, or
    synchronous waves) must not change a single request or row."""
    from test_refine import SCRIPT

    from retrace.methods.base import MethodContext
    from retrace.util.registry import METHODS, TASKS

    problems = smoke_math_problems(2)
    rows, seen = {}, {}
    for mode in ("wave", "async"):
        engine = {**SCRIPT, "batch_size": 3, **({"async": True} if mode == "async" else {})}
        llm, engines = scripted_llm(tmp_path / mode, engine)
        ctx = MethodContext(seed=7, task=TASKS.get("smoke_math"), template="math_cot.j2")
        rows[mode] = METHODS.get("refine")(
            problems, method_cfg("refine", n=3, depth=2, critic=critic), llm, ctx
        )
        seen[mode] = sorted(llm.key(r) for e in engines for r in e.requests_seen)
    assert rows["async"] == rows["wave"] and seen["async"] == seen["wave"] and seen["wave"]
