"""retrace.engine.scheduler: the in-flight bound, the priority of a rollout's next turn, and that
neither changes a single output.

The engine here answers on its own thread but only once it holds as many requests as the
scheduler may send (the bound, or everything left): an unbounded scheduler would hand it more,
a bounded one exactly that many; by construction, not by timing."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
from fake_backend import chat, manifest

from retrace.backends.base import Backend
from retrace.engine.llm import CachedLLM
from retrace.engine.scheduler import DEFAULT_IN_FLIGHT, in_flight_bound
from retrace.store.cache import RequestCache
from retrace.util.records import Completion


class GatedEngine(Backend):
    """Holds submitted requests until it has `gate` of them (or `total` were submitted in all),
    then finishes the oldest; records the most it ever held and the order of submission."""

    name = "gated"

    def __init__(self, gate: int, total: int):
        super().__init__(manifest(), {})
        self.gate, self.total = gate, total
        self.held: list[tuple[str, Future]] = []
        self.submitted: list[str] = []
        self.most = 0
        self.lock = threading.Condition()
        self.worker = threading.Thread(target=self._run, daemon=True)
        self.worker.start()

    def generate(self, requests):  # pragma: no cover - the scheduler uses submit here
        raise AssertionError("submit only")

    def submit(self, request):
        future: Future = Future()
        with self.lock:
            self.held.append((request.tag, future))
            self.submitted.append(request.tag)
            self.most = max(self.most, len(self.held))
            self.lock.notify()
        return future

    def _run(self) -> None:
        finished = 0
        while finished < self.total:
            with self.lock:
                left = self.total - finished
                # a gate that can never fill is the test's mistake: fail it, never hang
                assert self.lock.wait_for(lambda: len(self.held) >= min(self.gate, left), timeout=60)
                tag, future = self.held.pop(0)
            future.set_result(Completion(f"out:{tag}", "stop", 1, 1))
            finished += 1


def gated_llm(tmp_path: Path, engine: Backend, bound: int | None) -> CachedLLM:
    cache = RequestCache(tmp_path / "c", job="t")
    return CachedLLM(lambda: engine, "gated", manifest(), cache, max_in_flight=bound)


def test_the_engine_never_holds_more_than_the_bound(tmp_path):
    engine = GatedEngine(gate=3, total=10)
    llm = gated_llm(tmp_path, engine, bound=3)
    out = llm.generate([chat(f"r{i}") for i in range(10)])
    assert engine.most == 3  # full, never over
    assert [c.text for c in out] == [f"out:r{i}" for i in range(10)]


def test_without_a_bound_setting_the_default_applies(tmp_path):
    engine = GatedEngine(gate=10, total=10)
    llm = gated_llm(tmp_path, engine, bound=None)
    llm.generate([chat(f"r{i}") for i in range(10)])
    assert engine.most == 10 and in_flight_bound(llm) == DEFAULT_IN_FLIGHT


@pytest.mark.parametrize("bad", [0, -1, "8", 2.5])
def test_a_bad_bound_is_one_clear_error(tmp_path, bad):
    llm = gated_llm(tmp_path, GatedEngine(gate=1, total=0), bound=bad)
    with pytest.raises(ValueError, match="backend.engine.max_in_flight must be a positive integer"):
        llm.generate([chat("r")])


def turns(name: str, n: int):
    text = ""
    for t in range(n):
        text = (yield chat(f"{name}{t} {text}".strip())).text
    return text


def test_a_rollouts_next_turn_goes_ahead_of_fresh_rollouts(tmp_path):
    # One request at a time: after a's first turn, its second goes before b's and c's first.
    engine = GatedEngine(gate=1, total=6)
    llm = gated_llm(tmp_path, engine, bound=1)
    llm.run_tasks([turns("a", 2), turns("b", 2), turns("c", 2)])
    assert [s.split()[0] for s in engine.submitted] == ["a0", "a1", "b0", "b1", "c0", "c1"]


def test_identical_requests_queued_behind_the_bound_are_generated_once(tmp_path):
    engine = GatedEngine(gate=1, total=2)
    llm = gated_llm(tmp_path, engine, bound=1)
    out = llm.generate([chat("x"), chat("y"), chat("y"), chat("x")])
    assert sorted(engine.submitted) == ["x", "y"]
    assert [c.text for c in out] == ["out:x", "out:y", "out:y", "out:x"]


def test_the_bound_changes_no_output(tmp_path):
    def run(bound: int) -> tuple[list, list]:
        engine = GatedEngine(gate=min(bound, 4), total=12)  # four rollouts: at most 4 at once
        llm = gated_llm(tmp_path / str(bound), engine, bound=bound)
        results = llm.run_tasks([turns(n, 3) for n in "abcd"])
        cached = llm.cache.get_many(llm.key(chat(t)) for t in engine.submitted)
        return results, sorted(c.text for c in cached.values())

    assert run(1) == run(2) == run(12)
