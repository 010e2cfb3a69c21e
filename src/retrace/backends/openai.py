"""Any OpenAI-compatible server (`vllm serve`, llama.cpp's `llama-server`, a hosted API).

Chat requests go to /chat/completions, raw prompts to /completions, through the `openai`
client, `concurrency` at a time from a thread pool. A request with `continue_final` sends
its partial assistant message last: llama.cpp continues it by itself (assistant prefill)
and echoes the prefix in its reply, which is cut off so that `text` is the continuation
alone; vLLM needs `continue_final_message` in the body, sent only when `server: vllm`.

Engine config keys: base_url (e.g. http://127.0.0.1:8000/v1), model (the served name;
default: the manifest's name), server ("llamacpp" | "vllm" | "other"), api_key_env (the
*name* of the environment variable holding the key; keys never live in config),
concurrency, timeout_s, max_retries, batch_size. Does not cover: checking that the served
weights are the manifest's (the server is trusted to serve `model`), nor providers that
reject the extra sampling fields (top_k, seed) that vLLM and llama.cpp accept.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from retrace.backends.base import (
    Backend,
    BackendError,
    completion_from_openai,
    drop_echoed_prefill,
    messages_payload,
    openai_sampling,
)
from retrace.util.records import Completion, Request, TokenLogprob
from retrace.util.registry import BACKENDS

# Fields the openai client takes as arguments; the rest of a body travels in extra_body.
_CLIENT_FIELDS = {"temperature", "top_p", "max_tokens", "seed", "stop", "logprobs", "top_logprobs"}


@BACKENDS.register("openai")
class OpenAIBackend(Backend):
    name = "openai"
    engine_kinds = {
        "base_url": "str",
        "api_key_env": "str",
        "model": "str",
        "server": "str",
        "concurrency": "int",
        "timeout_s": "number",
        "max_retries": "int",
        "batch_size": "int",
        "deterministic": "bool",
    }

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        import openai  # lazy: only this plugin needs the client

        if not self.engine.get("base_url"):
            raise BackendError("openai backend needs engine.base_url (e.g. http://127.0.0.1:8000/v1)")
        self.base_url = str(self.engine["base_url"]).rstrip("/")
        self.served = self.engine.get("model") or model.get("name")
        self.server = self.engine["server"]  # config/backend/openai.yaml (served.yaml) states these
        self._client = openai.OpenAI(
            api_key=_api_key(self.engine),
            base_url=self.base_url,
            timeout=float(self.engine["timeout_s"]),
            max_retries=int(self.engine["max_retries"]),
        )
        # Deterministic mode sends one request at a time: a server batches concurrent requests
        # by arrival time, which no client controls (the server must also run deterministically:
        # one slot for llama-server, VLLM_BATCH_INVARIANT=1 for `vllm serve`).
        workers = 1 if self.deterministic else int(self.engine["concurrency"])
        self._pool = ThreadPoolExecutor(max_workers=workers)

    @classmethod
    def identity(cls, model: dict, engine: dict) -> dict:
        return {**super().identity(model, engine), "served_model": engine.get("model") or model.get("name")}

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return list(self._pool.map(self._one, requests))

    def submit(self, request: Request) -> Future:
        return self._pool.submit(self._one, request)

    def _one(self, request: Request) -> Completion:
        import openai

        start = time.perf_counter()
        try:
            if request.prompt is not None:
                reply = self._complete(request)
            else:
                reply = self._chat(request)
        except openai.APIStatusError as e:
            raise BackendError(
                f"{self.base_url}: HTTP {e.status_code} for request tag={request.tag!r}: {e.message}"
            ) from e
        except openai.APIConnectionError as e:  # includes timeouts
            raise BackendError(
                f"{self.base_url}: no reply for request tag={request.tag!r} ({type(e).__name__}: {e})"
            ) from e
        completion = completion_from_openai(reply, request, time.perf_counter() - start)
        logprobs = parse_any_logprobs(reply["choices"][0].get("logprobs"), request.sampling.logprobs)
        text = completion.text if self.server == "vllm" else drop_echoed_prefill(completion.text, request)
        return replace(completion, text=text, logprobs=logprobs)

    def _fields(self, request: Request) -> tuple[dict, dict]:
        """Client arguments and server-specific extras for one request."""
        args, extra = _split(openai_sampling(request))
        if self.deterministic and self.server == "llamacpp":
            extra["cache_prompt"] = False  # reused KV was computed in another batch shape
        return args, extra

    def _chat(self, request: Request) -> dict:
        args, extra = self._fields(request)
        if request.continue_final and self.server == "vllm":
            extra.update(continue_final_message=True, add_generation_prompt=False)
        reply = self._client.chat.completions.create(
            model=self.served, messages=messages_payload(request), extra_body=extra or None, **args
        )
        return reply.model_dump()

    def _complete(self, request: Request) -> dict:
        args, extra = self._fields(request)
        if "logprobs" in args:
            # The completions endpoint takes a count; ask for at least one to get the chosen token.
            args["logprobs"] = max(1, args.pop("top_logprobs"))
        reply = self._client.completions.create(
            model=self.served, prompt=request.prompt, extra_body=extra or None, **args
        )
        return reply.model_dump()

    def close(self) -> None:
        if getattr(self, "_client", None) is not None:
            self._pool.shutdown(wait=True)
            self._client.close()
            self._client = None


def _api_key(engine: dict) -> str:
    name = engine.get("api_key_env")
    if not name:
        return "EMPTY"  # local servers ignore the key, but the client insists on one
    key = os.environ.get(name)
    if not key:
        raise BackendError(f"engine.api_key_env names {name!r}, but that environment variable is unset")
    return key


def _split(body: dict) -> tuple[dict, dict]:
    args = {k: v for k, v in body.items() if k in _CLIENT_FIELDS}
    return args, {k: v for k, v in body.items() if k not in _CLIENT_FIELDS}


def parse_any_logprobs(block: dict | None, k: int | None) -> tuple[TokenLogprob, ...] | None:
    """Chosen-token logprobs (+ k alternatives) from either OpenAI logprobs layout.

    Chat replies (and llama.cpp's completions) carry `content: [{token, logprob,
    top_logprobs}]`; legacy completions (vLLM) carry parallel lists `tokens`,
    `token_logprobs` and `top_logprobs: [{token: logprob}]`.
    """
    if k is None or not block:
        return None
    if block.get("content") is not None:
        return tuple(
            TokenLogprob(
                t["token"],
                float(t["logprob"]),
                tuple((a["token"], float(a["logprob"])) for a in (t.get("top_logprobs") or ())[:k]),
            )
            for t in block["content"]
        )
    tops = block.get("top_logprobs") or [None] * len(block.get("tokens") or ())
    return tuple(
        TokenLogprob(tok, float(lp), tuple(sorted((top or {}).items(), key=lambda x: -x[1]))[:k])
        for tok, lp, top in zip(block.get("tokens") or (), block.get("token_logprobs") or (), tops)
    )
