"""Per-rollout scheduling: keep the engine's slots full across the turns of multi-turn methods.

A *task* is a generator that yields one `Request` at a time and is sent back its
`Completion`; what it returns is its result. It may also yield a list of Requests (a
*fan-out*, e.g. one search step's expansions) and is sent back the list of their
Completions, in the same order, once all of them are done; an empty list is answered at
once. `drive(llm, tasks)` runs all tasks at once: a task's next request goes to the engine
as soon as its previous one (or its whole fan-out) came back, so a rollout never waits for
the slowest rollout of its turn (the "turn barrier" of calling `llm.generate` once per
turn over every rollout). `CachedLLM.generate` is `drive` over one-request tasks, so
single-turn and multi-turn methods share one path.

What stays as before: the same requests (a task builds its next request from its own
history only), the same cache keys, cache hits served without the engine, each finished
request committed to the cache before its task moves on (a kill loses only requests in
flight), and identical requests in flight at once generated once. A fan-out's members are
each of these on their own: some may be cache hits and others generated, and identical
members (within one fan-out or across tasks) share one engine request.

Engines: a backend whose `submit(request)` returns a Future (llama.cpp, OpenAI-compatible
servers, in-process vLLM through its engine thread) gets each request as soon as it is ready
and works through them with its own slots or running batch. A backend without it
(transformers: it batches synchronously) gets *waves*: every request that is ready is batched into `generate` calls of
`batch_size`, and the tasks that were answered move on together. Deterministic engine
mode (retrace.backends.base) makes the outputs independent of the order either way.

In flight and order: at most `max_in_flight` distinct requests are with the engine at once
(`CachedLLM.max_in_flight`, from `backend.engine.max_in_flight`, default DEFAULT_IN_FLIGHT);
the rest wait in a priority queue where a rollout's next turn goes ahead of turns of rollouts
that are less far along (fresh ones last), and, at equal depth, earlier tasks go first, so a
rollout's history is still in the engine's prefix cache when its next turn arrives, and a
fan-out's members are sent together. Identical requests join the one in flight or queued (they
take no slot). The engine's Futures report back through a queue (a done-callback each), so a
completion costs O(1), however many are in flight.

Progress (retrace.util.progress) is shown once the engine gets its first request: finished tasks
out of all, and generated tokens per second; an all-cached run prints nothing.
"""

from __future__ import annotations

import heapq
import queue
import time
from collections.abc import Generator, Iterable, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrace.util.records import Completion, Request

if TYPE_CHECKING:
    from retrace.util.progress import Bar

# A task is started with send(None), as a generator must be, then sent its answers.
Task = Generator["Request | Sequence[Request]", "Completion | list[Completion] | None", Any]
Waiter = tuple[int, "int | None"]  # (task, member of its fan-out; None for a single request)
# Requests with the engine at once: enough to fill a GPU engine's running batch several times
# over (vLLM's max_num_seqs is 256-1024), few enough that the queue stays ordered by priority.
DEFAULT_IN_FLIGHT = 1024


def one(request: Request) -> Task:
    """The task of a single request: its completion is its result."""
    completion = yield request
    return completion


def drive(llm, tasks: Iterable[Task], unit: str = "tasks") -> list[Any]:
    """Run `tasks` against `llm` (a CachedLLM) and return their results in task order."""
    with ExitStack() as stack:
        return _Driver(llm, list(tasks), stack, unit).run()


def in_flight_bound(llm) -> int:
    """The most requests `llm`'s engine gets at once (a CachedLLM's max_in_flight)."""
    bound = getattr(llm, "max_in_flight", None)
    if bound is None:
        return DEFAULT_IN_FLIGHT
    if not isinstance(bound, int) or isinstance(bound, bool) or bound < 1:
        raise ValueError(f"backend.engine.max_in_flight must be a positive integer, got {bound!r}")
    return bound


@dataclass
class _FanOut:
    """A task's fan-out in progress: its completions so far (None: not back yet)."""

    completions: list
    left: int


class _Driver:
    """The state of one `drive`: tasks, requests ready or in flight, and who awaits which key."""

    def __init__(self, llm, tasks: list[Task], stack: ExitStack, unit: str):
        self.llm, self.tasks = llm, tasks
        self.stack, self.unit, self.finished = stack, unit, 0
        self.bar: Bar | None = None  # opened at the engine's first request
        self.results: list[Any] = [None] * len(tasks)
        self.ready: list[tuple[Waiter, Request]] = []
        self.waiting: dict[str, list[Waiter]] = {}  # key in flight -> who awaits it
        self.fanouts: dict[int, _FanOut] = {}  # task -> its fan-out in progress
        self.requests: dict[str, Request] = {}
        self.futures: dict[Future, str] = {}  # with the engine -> its key
        self.done: queue.SimpleQueue = queue.SimpleQueue()  # futures the engine finished
        self.pending: list[tuple[int, int, int, str]] = []  # heap of (-turn, task, member, key)
        self.turns = [0] * len(tasks)  # requests or fan-outs each task has asked so far
        self.in_flight, self.bound = 0, in_flight_bound(llm)
        self.wave: list[str] = []  # keys for a synchronous engine
        self.looked_up: dict[str, float] = {}  # key in flight -> its last cache lookup
        self.busy_since: float | None = None

    def run(self) -> list[Any]:
        for i in range(len(self.tasks)):
            self.advance(i, None)
        while self.ready or self.waiting:
            self.dispatch()
            if self.waiting:
                self.collect()
        return self.results

    def advance(self, i: int, answer: Completion | list[Completion] | None) -> None:
        """Send a task its answer; queue what it asks next, or keep its result."""
        while True:
            try:
                asked = self.tasks[i].send(answer)
            except StopIteration as stop:
                self.finish(i, stop.value)
                return
            if self.queue(i, asked):
                return
            answer = []  # an empty fan-out has nothing to wait for

    def queue(self, i: int, asked: Request | Sequence[Request]) -> bool:
        """Queue task i's request or the members of its fan-out; False if there are none."""
        self.turns[i] += 1
        if isinstance(asked, Request):
            self.ready.append(((i, None), asked))
            return True
        asked = list(asked)
        if asked:
            self.fanouts[i] = _FanOut([None] * len(asked), len(asked))
            self.ready.extend(((i, j), request) for j, request in enumerate(asked))
        return bool(asked)

    def finish(self, i: int, result: Any) -> None:
        self.results[i] = result
        self.finished += 1
        if self.bar is not None:
            self.bar.advance(1)

    def dispatch(self) -> None:
        """Serve ready requests from the cache (repeatedly: a hit may make the next one
        ready), queue the misses by priority and hand the engine what the bound allows."""
        while self.ready:
            ready, self.ready = self.ready, []
            keys = [self.llm.key(r) for _, r in ready]
            now = time.time()
            found = self.llm.lookup(k for k in keys if k not in self.waiting)
            for (waiter, request), key in zip(ready, keys):
                if key in found:
                    self.deliver([waiter], found[key])
                elif key in self.waiting:  # in flight or queued: generated once
                    self.waiting[key].append(waiter)
                else:
                    self.waiting[key], self.requests[key] = [waiter], request
                    self.looked_up[key] = now
                    i, member = waiter
                    heapq.heappush(self.pending, (-self.turns[i], i, -1 if member is None else member, key))
        while self.pending and self.in_flight < self.bound:
            key = heapq.heappop(self.pending)[3]
            self.in_flight += 1
            self.send(key, self.requests[key])

    def send(self, key: str, request: Request) -> None:
        """Hand a missed request to the engine: a Future to collect, or one of the next wave."""
        if self.bar is None:
            self.open_bar()
        future = self.llm.backend.submit(request)
        if future is None:
            self.wave.append(key)
            return
        if self.busy_since is None:
            self.busy_since = time.perf_counter()
        self.futures[future] = key
        future.add_done_callback(self.done.put)  # from the engine's thread, or at once if done

    def open_bar(self) -> None:
        from retrace.util.progress import progress

        label = f"generate {self.llm.model.get('name', '')}".strip()
        self.bar = self.stack.enter_context(progress(label, len(self.tasks), unit=self.unit))
        self.bar.advance(self.finished)

    def collect(self) -> None:
        """Wait for what the engine finishes next, commit it, and move its tasks on."""
        if self.wave:
            self.collect_wave()
            return
        done = [self.done.get()]  # O(1) per completion, however many are in flight
        while not self.done.empty():  # and everything else already back: one commit
            done.append(self.done.get())
        finished = []
        for future in done:
            key = self.futures.pop(future)
            self.in_flight -= 1
            try:
                finished.append((key, future.result()))
            except BaseException:
                self.commit(finished)  # what already came back in this round is kept too
                self.drain()  # and what the engine still finishes; then fail
                raise
        if not self.futures and self.busy_since is not None:
            self.llm.usage.engine_seconds += time.perf_counter() - self.busy_since
            self.busy_since = None
        self.commit(finished)

    def collect_wave(self) -> None:
        """Generate the wave in `batch_size` chunks, committing each chunk as it returns."""
        keys, self.wave = self.wave, []
        self.in_flight -= len(keys)  # generated (or served) before this returns
        size = max(1, self.llm.backend.batch_size())
        for start in range(0, len(keys), size):
            chunk = keys[start : start + size]
            if start:  # a job sharing the cache may have published some since the lookup
                chunk = self.serve_published(chunk)
                if not chunk:
                    continue
            began = time.perf_counter()
            done = self.llm.backend.generate([self.requests[k] for k in chunk])
            self.llm.usage.engine_seconds += time.perf_counter() - began
            self.commit(list(zip(chunk, done)))

    def serve_published(self, chunk: list[str]) -> list[str]:
        """Deliver the keys of `chunk` found in the cache now; the rest, to generate."""
        now = time.time()
        found = self.llm.lookup(chunk)
        for key, completion in found.items():
            self.requests.pop(key)
            self.looked_up.pop(key)
            self.deliver(self.waiting.pop(key), completion)
        rest = [k for k in chunk if k not in found]
        self.looked_up.update((k, now) for k in rest)
        return rest

    def commit(self, finished: list[tuple[str, Completion]]) -> None:
        """Store finished requests in the cache, then hand them to whoever awaits them."""
        if not finished:
            return
        if self.bar is not None:  # opened before the first request went to the engine
            self.bar.advance(0, sum(c.generated_tokens for _, c in finished))
        looked_up = min(self.looked_up[k] for k, _ in finished)
        self.llm.store(((k, self.requests[k], c) for k, c in finished), looked_up=looked_up)
        for key, completion in finished:
            self.requests.pop(key)
            self.looked_up.pop(key)
            self.deliver(self.waiting.pop(key), replace(completion, key=key))

    def deliver(self, waiters: list[Waiter], completion: Completion) -> None:
        """Hand a completion to everyone awaiting its key (each use is counted)."""
        for i, member in waiters:
            self.llm.usage.add(completion)
            if member is None:
                self.advance(i, completion)
            else:
                self.gather(i, member, completion)

    def gather(self, i: int, member: int, completion: Completion) -> None:
        """One member of task i's fan-out is back; with the last one, the task moves on."""
        fanout = self.fanouts[i]
        fanout.completions[member] = completion
        fanout.left -= 1
        if not fanout.left:
            del self.fanouts[i]
            self.advance(i, fanout.completions)

    def drain(self) -> None:
        """After an engine error: keep every request that still finishes, drop the rest."""
        for future in self.futures:
            future.cancel()
        finished = []
        for future, key in list(self.futures.items()):
            if not future.cancelled() and future.exception() is None:
                finished.append((key, future.result()))
        self.futures.clear()
        if finished:
            self.llm.store(
                ((k, self.requests[k], c) for k, c in finished),
                looked_up=min(self.looked_up[k] for k, _ in finished),
            )
