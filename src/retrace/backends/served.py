"""A client of an engine started by `retrace serve`: service mode for clusters.

One long-lived server per GPU (`python -m retrace serve`, retrace.app.serve) holds the engine;
generation jobs are light clients that send their requests through the OpenAI-compatible
client (retrace.backends.openai). The server's endpoint file (retrace.backends.endpoint) says where it
listens and what it serves; before the first request the client checks that the server serves
the job's model (fingerprint), chat template, engine and deterministic mode, and that the live
server at the URL answers to the name the file records (GET /models). Anything else is refused
with one line: a client never records results of another model.

Engine config keys (config/backend/served.yaml): endpoint (the file `retrace serve
--endpoint` writes, or a folder of such files, one per server: retrace.backends.endpoint.candidates
picks one per job by its route, model/dataset/seed, which the generate stage sets), wait_s
(how long to wait for the file to appear), server (the engine behind it: llamacpp | vllm), deterministic (must equal
the server's), concurrency, timeout_s, max_retries, batch_size, api_key_env; and what the server
must run with: max_model_len (vllm) or n_ctx (llamacpp), the job's context: a server started
with a shorter one is refused in one line before any request (its requests would fail one by
one), and the other engine settings `retrace serve --experiment` starts the server with. The
server's own settings and package versions are recorded in each job's provenance (`server`).

Health during the run: every `health_s` seconds (default 30), and after any request that got
no reply, the client asks the server for GET /models; once it no longer answers, the request
and every later one fail at once with one line naming the endpoint file and the URL. What
finished before stays in the request cache (retrace.engine.scheduler commits it), so a rerun against
a restarted server generates only the rest.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from retrace.backends import endpoint
from retrace.backends.base import Backend, BackendError
from retrace.backends.llamacpp import prompt_cache_on
from retrace.backends.openai import OpenAIBackend, _api_key
from retrace.util.records import Completion, Request
from retrace.util.registry import BACKENDS


@BACKENDS.register("served")
class ServedBackend(OpenAIBackend):
    name = "served"
    # The server's settings (config/backend/served.yaml) decide how fast and in how much memory
    # it runs, never what a client's request generates: labels that differ only in them share
    # one client engine in a cell, at the smallest memory share (retrace.planning.cells).
    memory_settings = ("gpu_memory_utilization", "kv_cache_memory_bytes")
    capacity_settings = OpenAIBackend.capacity_settings | {
        *memory_settings,
        "max_num_seqs",
        "enable_prefix_caching",
        "tensor_parallel_size",
        "n_parallel",
    }

    def __init__(self, model: dict, engine: dict | None = None):
        settings = dict(engine or {})
        if not settings.get("endpoint"):
            raise endpoint.EndpointError(
                "served backend needs backend.engine.endpoint (the file `retrace serve` writes)"
            )
        endpoint.wait_for(settings["endpoint"], float(settings.get("wait_s") or 0))
        key = _api_key(settings) if settings.get("api_key_env") else None
        path, ep = first_answering(
            endpoint.candidates(settings["endpoint"], model, settings, str(settings.get("route") or "")),
            float(settings["timeout_s"]),
            key,
        )
        settings.update(base_url=ep["url"], model=ep["served_model"], server=ep["backend"])
        super().__init__(model, settings)
        self.endpoint = ep
        self.device = f"served by {ep['host']} at {ep['url']}"  # the server's own device is not known here
        self.health = Health(path, ep, key, float(settings.get("health_s") or 30))

    @classmethod
    def identity(cls, model: dict, engine: dict) -> dict:
        # The cache key names the engine behind the server, not the transport: a request sent
        # over HTTP to `retrace serve --backend llamacpp` runs in the same xllamacpp server code,
        # with the same body, as one the in-process llamacpp backend hands it directly. So
        # their results share keys (a served run resumes an in-process run's cache and back),
        # as in-process runs with other slot counts already do; in deterministic mode the two
        # are bit-identical (tests/workflow/test_served.py). Likewise `vllm serve` and
        # `vllm.LLM` share vLLM's model runner and sampler. endpoint.check refuses a server
        # whose engine, model, template or mode differ from what this key says.
        return {**Backend.identity(model, engine), "backend": engine["server"]}

    @property
    def server_record(self) -> dict:
        """What provenance records about the server: its endpoint file (settings, versions, host)."""
        return self.endpoint

    def _one(self, request: Request) -> Completion:
        self.health.check()
        try:
            return super()._one(request)
        except BackendError:
            self.health.check(now=True)  # a server that died says so in one line
            raise

    def _fields(self, request: Request) -> tuple[dict, dict]:
        args, extra = super()._fields(request)
        if self.server == "llamacpp":
            # The KV prefix reuse the server was started with, as the in-process engine sends it.
            extra["cache_prompt"] = prompt_cache_on(self.endpoint.get("engine") or {})
        return args, extra


class Health:
    """Whether the server of endpoint `ep` (file `path`) still answers, asked at most every
    `every` seconds (or now); once it does not, `check` raises EndpointError, then and ever after."""

    def __init__(self, path: Path, ep: dict, key: str | None, every: float):
        self.path, self.ep, self.key, self.every = path, ep, key, every
        self.last = time.monotonic()
        self.gone: endpoint.EndpointError | None = None
        self.lock = threading.Lock()

    def check(self, now: bool = False) -> None:
        with self.lock:  # one probe at a time; the request threads wait for its verdict
            if self.gone is None and (now or time.monotonic() - self.last >= self.every):
                self.last = time.monotonic()
                self.gone = self.probe()
            if self.gone is not None:
                raise endpoint.EndpointError(str(self.gone))  # one instance per failed request

    def probe(self) -> endpoint.EndpointError | None:
        url, name = self.ep["url"], self.ep["served_model"]
        try:
            listed = endpoint.served_models(url, self.key, timeout=30)  # a busy server is slow, not gone
        except OSError as e:
            why = f"no answer ({e})"
        else:
            if name in listed:
                return None
            why = f"it serves {sorted(listed)}, not {name}"
        return endpoint.EndpointError(
            f"the server of endpoint {self.path} ({url}) stopped serving during the run: {why}; "
            "finished requests are kept in the request cache: start `retrace serve` again and rerun"
        )


def first_answering(
    found: list[tuple[Path, dict]], timeout: float, key: str | None = None
) -> tuple[Path, dict]:
    """The first endpoint (file, content) whose live server answers to the recorded name (GET
    /models); EndpointError naming the last failure if none does (stopped servers, stale files)."""
    why = ""
    for path, ep in found:
        try:
            listed = endpoint.served_models(ep["url"], key, timeout=min(timeout, 30))
        except OSError as e:
            why = f"refusing endpoint {path}: no server answers at {ep['url']} ({e}); start `retrace serve` again"
            continue
        if ep["served_model"] in listed:
            return path, ep
        why = (
            f"refusing endpoint {path}: the server at {ep['url']} serves {sorted(listed)}, "
            f"not {ep['served_model']} (a stale endpoint file?)"
        )
    raise endpoint.EndpointError(why)
