"""llama.cpp through xllamacpp's in-process server: the default CPU engine.

Requests are spread over the engine's parallel slots (`engine.n_parallel`) by a thread
pool; llama.cpp batches the slots together. Per-request seeds make sampling repeatable
for a fixed slot count, but outputs can still differ in the last bits when batch
composition changes (llama.cpp does not promise batch-invariant kernels).
Engine config keys: n_parallel, n_ctx (per slot), n_threads, n_batch, batch_size, port,
cache_prompt, alias (the model name the HTTP server answers to; `retrace serve` sets it). With `cache_prompt` on (the default), a request whose prefix is already in a
slot's KV cache skips recomputing it; that is faster (refinement relies on it) but the reused
KV was computed in a different batch shape, so sampled outputs are not bitwise repeatable
across a resumed run.

`deterministic: true` is the mode for bit-identical outputs at a fixed seed: one slot (a
request is never batched with another, so timing cannot change its batch) and no KV prefix
reuse (every prompt is computed in the same chunks on every run). llama.cpp has no
batch-invariant kernels to keep the slots, so this mode costs the parallel-slot speed-up;
`make bench` prints the ratio. It does not cover a change of thread count, CPU kind or
llama.cpp build, which are recorded in provenance rather than held fixed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from retrace.backends.base import (
    Backend,
    BackendError,
    completion_from_openai,
    drop_echoed_prefill,
    is_deterministic,
    messages_payload,
    openai_sampling,
)
from retrace.util.records import Completion, Request
from retrace.util.registry import BACKENDS


@BACKENDS.register("llamacpp")
class LlamaCppBackend(Backend):
    name = "llamacpp"
    engine_kinds = {
        "n_parallel": "int",
        "n_ctx": "int",
        "n_threads": "int",
        "n_batch": "int",
        "batch_size": "int",
        "cache_prompt": "bool",
        "deterministic": "bool",
    }

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        import xllamacpp  # lazy: the wheel carries a native library

        if not model.get("gguf"):
            raise BackendError(f"model {model.get('name')!r} has no GGUF file; llamacpp needs one")
        p = xllamacpp.CommonParams()
        p.model.path = model["gguf"]
        self.slots = effective_slots(self.engine)
        p.n_parallel = self.slots
        p.n_ctx = int(self.engine["n_ctx"]) * self.slots  # config/backend/llamacpp.yaml states these
        threads = int(self.engine["n_threads"])
        p.cpuparams.n_threads = threads
        p.cpuparams_batch.n_threads = threads
        p.n_batch = int(self.engine["n_batch"])
        p.hostnames = ["127.0.0.1"]  # the built-in HTTP server only ever listens on loopback
        p.port = int(self.engine.get("port") or _free_port())  # `retrace serve` names one; else any free
        if self.engine.get("alias"):
            p.model_alias = {str(self.engine["alias"])}
        if model.get("chat_template"):
            p.chat_template = model["chat_template"]
        self._server = xllamacpp.Server(p)
        self._pool = ThreadPoolExecutor(max_workers=self.slots)

    @property
    def url(self) -> str:
        """The OpenAI-compatible HTTP address of this engine (used by the openai backend's tests)."""
        return self._server.listening_address

    def batch_size(self) -> int:
        return int(self.engine.get("batch_size", 4 * self.slots))

    def _one(self, request: Request) -> Completion:
        body = openai_sampling(request)
        body["cache_prompt"] = prompt_cache_on(self.engine)
        start = time.perf_counter()
        if request.prompt is not None:
            body["prompt"] = request.prompt
            if request.sampling.logprobs is not None:
                body["n_probs"] = max(1, request.sampling.logprobs)
            reply = self._server.handle_completions(body)
        else:
            # A final assistant message is continued verbatim (llama.cpp's assistant prefill).
            body["messages"] = messages_payload(request)
            reply = self._server.handle_chat_completions(body)
        done = completion_from_openai(reply, request, time.perf_counter() - start)
        # llama.cpp echoes a continued assistant prefix; keep only the continuation.
        return replace(done, text=drop_echoed_prefill(done.text, request))

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return list(self._pool.map(self._one, requests))

    def submit(self, request: Request) -> Future:
        return self._pool.submit(self._one, request)

    def close(self) -> None:
        if getattr(self, "_server", None) is not None:
            self._pool.shutdown(wait=True)
            self._server = None


def effective_slots(engine: dict) -> int:
    """Parallel slots: `n_parallel`, or 1 in deterministic mode (no timing-dependent batches)."""
    return 1 if is_deterministic(engine) else int(engine["n_parallel"])


def prompt_cache_on(engine: dict) -> bool:
    """KV prefix reuse: `cache_prompt`, always off in deterministic mode."""
    return False if is_deterministic(engine) else bool(engine["cache_prompt"])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
