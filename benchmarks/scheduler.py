"""The scheduler's own cost at paper scale (`make bench-cluster`).

    PYTHONPATH=src .venv/bin/python benchmarks/scheduler.py [--requests 20000] [--turns 4]

An instant engine (one engine thread that answers each submitted request at once, as a real
engine's thread completes Futures) serves --requests requests twice, each time into a fresh
request cache:
- scheduled: `drive` over rollouts of --turns turns each (every turn's request built from the
  previous completion, as refinement's are), so every request passes through the scheduler's
  task bookkeeping, priority queue, in-flight bound and completion queue;
- ideal: the same requests with no scheduler, turn by turn: keyed, looked up once per turn,
  submitted to the same engine (at most the same number in flight) and committed to the same
  cache once per turn (the fewest commits: a kill would lose a whole turn), no tasks.
Prints `scheduler overhead at 20k requests: X× the ideal` (goal <= 1.2) and both wall times.
The ratio, not the seconds, is the measurement: both sides run on the same machine and load.
"""

from __future__ import annotations

import argparse
import queue
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from retrace.backends.base import Backend
from retrace.cache import RequestCache
from retrace.llm import CachedLLM
from retrace.records import Completion, Message, Request
from retrace.scheduler import DEFAULT_IN_FLIGHT

MODEL = {"name": "instant", "fingerprint": "0" * 64, "params": 1, "chat_template": None}


class InstantEngine(Backend):
    """Answers every request at once, on its own engine thread (Futures complete off the caller's)."""

    name = "instant"

    def __init__(self):
        super().__init__(MODEL, {})
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while (item := self.inbox.get()) is not None:
            future, request = item
            future.set_result(Completion(f"out {request.tag}", "stop", 8, 4))
            time.sleep(0)  # let the scheduler's thread run: completions arrive one by one

    def generate(self, requests):  # pragma: no cover - submit is used
        raise AssertionError("instant engine: submit only")

    def submit(self, request: Request) -> Future:
        future: Future = Future()
        self.inbox.put((future, request))
        return future

    def close(self) -> None:
        self.inbox.put(None)
        self.thread.join()


def request(rollout: int, turn: int, history: str) -> Request:
    text = f"rollout {rollout} turn {turn} after {history}"
    return Request(messages=(Message("user", text),), tag=f"{rollout}.{turn}")


def rollout(i: int, turns: int):
    history = ""
    for t in range(turns):
        history = (yield request(i, t, history)).text
    return history


def scheduled(root: Path, rollouts: int, turns: int) -> float:
    engine = InstantEngine()
    llm = CachedLLM(lambda: engine, "instant", MODEL, RequestCache(root / "scheduled", job="bench"))
    began = time.perf_counter()
    llm.run_tasks(rollout(i, turns) for i in range(rollouts))
    took = time.perf_counter() - began
    llm.close()
    llm.cache.close()
    return took


def ideal(root: Path, rollouts: int, turns: int) -> float:
    """The same requests, turn by turn (each turn's requests are known from the previous turn's
    completions), with only the work any job must do: key, look up, submit, commit."""
    engine = InstantEngine()
    llm = CachedLLM(lambda: engine, "instant", MODEL, RequestCache(root / "ideal", job="bench"))
    began = time.perf_counter()
    history = [""] * rollouts
    for t in range(turns):
        requests = [request(i, t, history[i]) for i in range(rollouts)]
        keys = [llm.key(r) for r in requests]
        llm.lookup(keys)
        done: queue.SimpleQueue = queue.SimpleQueue()
        sent = 0
        for i in range(min(DEFAULT_IN_FLIGHT, rollouts)):
            llm.backend.submit(requests[i]).add_done_callback(lambda f, i=i: done.put((i, f)))
            sent += 1
        completions: list = [None] * rollouts
        for _ in range(rollouts):
            i, future = done.get()
            completions[i] = future.result()
            if sent < rollouts:
                llm.backend.submit(requests[sent]).add_done_callback(lambda f, i=sent: done.put((i, f)))
                sent += 1
        llm.store(zip(keys, requests, completions), looked_up=began)  # one commit per turn
        history = [c.text for c in completions]
    took = time.perf_counter() - began
    llm.close()
    llm.cache.close()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each; the best counts")
    a = ap.parse_args()
    rollouts = a.requests // a.turns
    base, ours = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ideal(root / "warm", 200, a.turns)  # imports and first-use costs out of both timings
        scheduled(root / "warm", 200, a.turns)
        for r in range(a.repeats):  # alternating, so a change in the machine's load hits both
            base.append(ideal(root / f"{r}", rollouts, a.turns))
            ours.append(scheduled(root / f"{r}", rollouts, a.turns))
    base, ours = min(base), min(ours)
    n = rollouts * a.turns
    print(f"scheduler requests: {n} ({rollouts} rollouts x {a.turns} turns), at most {DEFAULT_IN_FLIGHT} in flight")
    print(f"scheduler wall time: {ours:.2f} s")
    print(f"ideal wall time: {base:.2f} s")
    print(f"scheduler overhead at {n // 1000}k requests: {ours / base:.2f}× the ideal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
