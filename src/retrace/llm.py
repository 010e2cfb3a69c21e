"""The model handle methods receive: a backend behind the request cache, with accounting.

Methods call `llm.generate(requests)`; cached requests are served without touching the
engine, the rest go to the engine batch by batch and each finished batch is committed to
the cache before the next starts. The engine itself is only loaded when a request misses,
so a job whose requests are all cached never loads the model. Engine work prints progress
lines to the job's log (retrace.progress: done/total requests, tok/s, ETA).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from retrace.backends.base import Backend
from retrace.cache import RequestCache, request_key
from retrace.progress import progress
from retrace.records import Completion, Request

log = logging.getLogger(__name__)


@dataclass
class Usage:
    """Token accounting of one job. `*_all` count every completion the method used
    (its compute, cached or not); the rest count only what the engine ran in this job."""
    requests: int = 0
    cache_hits: int = 0
    prompt_tokens_all: int = 0
    cached_prompt_tokens_all: int = 0
    generated_tokens_all: int = 0
    engine_prompt_tokens: int = 0
    engine_generated_tokens: int = 0
    engine_seconds: float = 0.0
    engine_loads: int = 0
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


class CachedLLM:
    """A lazily started backend behind a RequestCache."""

    def __init__(self, backend_factory: Callable[[], Backend], backend_name: str, model: dict,
                 cache: RequestCache, identity: dict | None = None):
        """`identity`: the backend class's `identity(model, engine)`; defaults to name + template."""
        self._factory, self._backend = backend_factory, None
        self.model, self.cache, self.usage = model, cache, Usage()
        self.identity = identity or {"backend": backend_name,
                                     "chat_template": model.get("chat_template") or "embedded"}

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            log.info("loading engine %s for %s", self.identity["backend"], self.model.get("name"))
            self._backend = self._factory()
            self.usage.engine_loads += 1
        return self._backend

    @property
    def device(self) -> str:
        """The engine's device, or a note that no engine was needed (all requests cached)."""
        return str(self._backend.device) if self._backend is not None else self._device_seen

    _device_seen = "none: every request was served from the cache"

    def key(self, request: Request) -> str:
        return request_key(self.model["fingerprint"], self.identity, request)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        keys = [self.key(r) for r in requests]
        found = self.cache.get_many(keys)
        self.cache.record_hits(k for k in keys if k in found)
        out: dict[str, Completion] = {k: replace(c, cache_hit=True, key=k) for k, c in found.items()}
        todo = [(k, r) for k, r in dict(zip(keys, requests)).items() if k not in out]
        if todo:
            self._run_engine(todo, out)
        result = [out[k] for k in keys]
        for c in result:
            self.usage.add(c)
        return result

    def _run_engine(self, todo: list, out: dict) -> None:
        """Generate the cache misses batch by batch, each batch committed before the next."""
        size = self.backend.batch_size()
        with progress(f"generate {self.model.get('name', '')}".strip(), len(todo)) as bar:
            for i in range(0, len(todo), size):
                batch = todo[i:i + size]
                start = time.perf_counter()
                done = self.backend.generate([r for _, r in batch])
                self.usage.engine_seconds += time.perf_counter() - start
                # Commit before moving on: a kill now loses at most the next batch.
                self.cache.put_many((k, r, replace(c, key=k)) for (k, r), c in zip(batch, done))
                out.update((k, replace(c, key=k)) for (k, _), c in zip(batch, done))
                bar.advance(len(batch), sum(c.generated_tokens for c in done))

    def close(self) -> None:
        if self._backend is not None:
            self._device_seen = str(self._backend.device)
            self._backend.close()
            self._backend = None
