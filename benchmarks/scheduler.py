"""The scheduler's own cost at paper scale (`make bench-cluster`).

    PYTHONPATH=src .venv/bin/python benchmarks/scheduler.py [--requests 20000] [--turns 4]

An instant engine (one engine thread that answers each submitted request at once, as a real
engine's thread completes Futures) serves --requests requests twice, each time into a fresh
cache (first an in-memory one, so the scheduler's own bookkeeping is what differs; then the
request cache on disk, whose commits the scheduler makes per batch of completions that came
back together, where the ideal commits once per turn):
- scheduled: `drive` over rollouts of --turns turns each (every turn's request built from the
  previous completion, as refinement's are), so every request passes through the scheduler's
  task bookkeeping, priority queue, in-flight bound and completion queue;
- ideal: the same requests with no scheduler, turn by turn: keyed, looked up once per turn,
  submitted to the same engine (at most the same number in flight) and committed to the same
  cache once per turn (the fewest commits: a kill would lose a whole turn), no tasks.
Prints `scheduler overhead at 20k requests: X× the ideal` (goal <= 1.2; in-memory cache),
`scheduler overhead with the request cache on disk: Y× the ideal` (commits per batch cost the
cache's per-commit locks; the cache's own numbers come from benchmarks/cache_cluster.py) and
the wall times. The ratio, not the seconds, is the measurement: both sides run alternately on
the same machine and load, best of --repeats.
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
from retrace.engine.llm import CachedLLM
from retrace.engine.scheduler import DEFAULT_IN_FLIGHT
from retrace.store.cache import RequestCache
from retrace.util.records import Completion, Message, Request

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


class MemoryCache:
    """The request cache's interface, in a dict: what remains is the scheduler's own work."""

    def __init__(self):
        self.entries: dict = {}
        self.commits = 0

    def get_many(self, keys):
        return {k: self.entries[k] for k in keys if k in self.entries}

    def record_hits(self, found) -> None:
        pass

    def put_many(self, items, looked_up=None) -> None:
        self.commits += 1
        self.entries.update((k, c) for k, _, c in items)

    def close(self) -> None:
        pass


def make_cache(root: Path, kind: str):
    return MemoryCache() if kind == "memory" else RequestCache(root, job="bench")


def request(rollout: int, turn: int, history: str) -> Request:
    text = f"rollout {rollout} turn {turn} after {history}"
    return Request(messages=(Message("user", text),), tag=f"{rollout}.{turn}")


def rollout(i: int, turns: int):
    history = ""
    for t in range(turns):
        history = (yield request(i, t, history)).text
    return history


def scheduled(root: Path, rollouts: int, turns: int, cache: str) -> float:
    engine = InstantEngine()
    llm = CachedLLM(lambda: engine, "instant", MODEL, make_cache(root / "scheduled", cache))
    began = time.perf_counter()
    llm.run_tasks(rollout(i, turns) for i in range(rollouts))
    took = time.perf_counter() - began
    llm.close()
    llm.cache.close()
    return took


def ideal(root: Path, rollouts: int, turns: int, cache: str) -> float:
    """The same requests, turn by turn (each turn's requests are known from the previous turn's
    completions), with only the work any job must do: key, look up, submit, commit."""
    engine = InstantEngine()
    llm = CachedLLM(lambda: engine, "instant", MODEL, make_cache(root / "ideal", cache))
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


def compare(rollouts: int, turns: int, repeats: int, cache: str) -> tuple[float, float]:
    """Best wall times of (ideal, scheduled), run alternately so a change in load hits both."""
    base, ours = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ideal(root / "warm", 200, turns, cache)  # imports and first-use costs out of both timings
        scheduled(root / "warm", 200, turns, cache)
        for r in range(repeats):
            base.append(ideal(root / f"{r}", rollouts, turns, cache))
            ours.append(scheduled(root / f"{r}", rollouts, turns, cache))
    return min(base), min(ours)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each; the best counts")
    a = ap.parse_args()
    rollouts = a.requests // a.turns
    n = rollouts * a.turns
    print(
        f"scheduler requests: {n} ({rollouts} rollouts x {a.turns} turns), at most {DEFAULT_IN_FLIGHT} in flight"
    )
    for cache in ("memory", "disk"):
        base, ours = compare(rollouts, a.turns, a.repeats, cache)
        print(f"scheduler wall time ({cache} cache): {ours:.2f} s")
        print(f"ideal wall time ({cache} cache): {base:.2f} s")
        if cache == "memory":
            print(f"scheduler overhead at {n // 1000}k requests: {ours / base:.2f}× the ideal")
        else:
            print(f"scheduler overhead with the request cache on disk: {ours / base:.2f}× the ideal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
