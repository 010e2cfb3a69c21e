"""The model handle methods receive: a backend behind the request cache, with accounting.

Methods call `llm.generate(requests)` or, for multi-turn methods, `llm.run_tasks(tasks)`
(per-rollout or per-problem generators of requests and fan-outs, retrace.engine.scheduler);
cached requests are served without touching the engine, the rest go to the engine and
each finished request is committed to the cache before its task moves on. The engine
itself is only loaded when a request misses, so a job whose requests are all cached never
loads the model. Engine work prints progress lines to the job's log (retrace.util.progress:
done/total, tok/s, ETA).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from retrace.backends.base import Backend
from retrace.store.cache import RequestCache, request_key
from retrace.util.records import MEASURED, Completion, Request

log = logging.getLogger(__name__)


@dataclass
class Usage:
    """Token accounting of one job. `*_all` count every completion the method used
    (its compute, cached or not); the rest count only what the engine ran in this job."""

    requests: int = 0
    cache_hits: int = field(default=0, metadata=MEASURED)
    prompt_tokens_all: int = 0
    cached_prompt_tokens_all: int = 0
    generated_tokens_all: int = 0
    # what the engine ran depends on what the request cache held: measured, not computed
    engine_prompt_tokens: int = field(default=0, metadata=MEASURED)
    engine_generated_tokens: int = field(default=0, metadata=MEASURED)
    # of engine_prompt_tokens, served from the engine's KV cache
    engine_cached_prompt_tokens: int = field(default=0, metadata=MEASURED)
    engine_seconds: float = field(default=0.0, metadata=MEASURED)
    engine_loads: int = field(default=0, metadata=MEASURED)
    # not in engine_seconds: what one engine per job costs
    engine_load_seconds: float = field(default=0.0, metadata=MEASURED)
    extra: dict = field(default_factory=dict)

    def add(self, c: Completion) -> None:
        self.requests += 1
        self.prompt_tokens_all += c.prompt_tokens
        self.cached_prompt_tokens_all += c.cached_prompt_tokens
        self.generated_tokens_all += c.generated_tokens
        if c.cache_hit:
            self.cache_hits += 1
        else:
            self.engine_prompt_tokens += c.prompt_tokens
            self.engine_generated_tokens += c.generated_tokens
            self.engine_cached_prompt_tokens += c.cached_prompt_tokens


class CachedLLM:
    """A lazily started backend behind a RequestCache."""

    def __init__(
        self,
        backend_factory: Callable[[], Backend],
        backend_name: str,
        model: dict,
        cache: RequestCache,
        identity: dict | None = None,
        max_in_flight: int | None = None,
    ):
        """`identity`: the backend class's `identity(model, engine)`; defaults to name + template.
        `max_in_flight`: the most requests the engine gets at once (None: the scheduler's
        default, retrace.engine.scheduler.DEFAULT_IN_FLIGHT); it changes speed, never outputs."""
        self._factory = backend_factory
        self._backend: Backend | None = None  # loaded at the first request the cache cannot answer
        self.max_in_flight = max_in_flight
        self.model, self.cache, self.usage = model, cache, Usage()
        self.identity = identity or {
            "backend": backend_name,
            "chat_template": model.get("chat_template") or "embedded",
        }

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            log.info("loading engine %s for %s", self.identity["backend"], self.model.get("name"))
            began = time.perf_counter()
            self._backend = self._factory()
            self.usage.engine_load_seconds += time.perf_counter() - began
            # a client of `retrace serve` loads no engine: the server's one load is counted once,
            # as the number of servers, not per job
            self.usage.engine_loads += getattr(self._backend, "server_record", None) is None
        return self._backend

    @property
    def device(self) -> str:
        """The engine's device, or a note that no engine was needed (all requests cached)."""
        return str(self._backend.device) if self._backend is not None else self._device_seen

    _device_seen = "none: every request was served from the cache"

    @property
    def server(self) -> dict | None:
        """The served engine's record (backends/served.py: its endpoint file), if the engine
        is a client of one and was started."""
        backend = self._backend
        return getattr(backend, "server_record", None) if backend is not None else self._server_seen

    _server_seen: dict | None = None

    def key(self, request: Request) -> str:
        return request_key(self.model["fingerprint"], self.identity, request)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        """Completions of `requests`, in order (one-request tasks of retrace.engine.scheduler)."""
        from retrace.engine.scheduler import drive, one

        return drive(self, (one(r) for r in requests), unit="requests")

    def run_tasks(self, tasks: Iterable, unit: str = "tasks") -> list:
        """Run per-rollout tasks (generators of requests or fan-outs, see retrace.engine.scheduler);
        `unit` names a task in the progress line."""
        from retrace.engine.scheduler import drive

        return drive(self, tasks, unit=unit)

    def lookup(self, keys: Iterable[str]) -> dict[str, Completion]:
        """Cached completions of `keys` (marked as hits), logged in the job's hit log.
        The scheduler looks up again before each engine batch: a job sharing the cache may
        have published some since, so the race window is one batch."""
        found = self.cache.get_many(keys)
        self.cache.record_hits(found)
        return {k: replace(c, cache_hit=True, key=k) for k, c in found.items()}

    def store(self, items: Iterable[tuple[str, Request, Completion]], looked_up: float | None = None) -> None:
        """Commit finished requests to the cache (each entry lands whole or not at all);
        `looked_up`: when their keys were last looked up (recorded with any duplicate)."""
        self.cache.put_many(((k, r, replace(c, key=k)) for k, r, c in items), looked_up=looked_up)

    def close(self) -> None:
        if self._backend is not None:
            self._device_seen = str(self._backend.device)
            self._server_seen = getattr(self._backend, "server_record", None)
            self._backend.close()
            self._backend = None
