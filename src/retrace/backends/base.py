"""The Backend interface every engine implements, plus helpers for OpenAI-style replies.

A backend turns Requests into Completions with engine-measured token counts. It is
built from a materialised model manifest (see retrace.store.models) and an *engine* config
(threads, slots, context size, dtype) that is kept apart from *sampling* settings,
which travel inside each Request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Future

from retrace.util.records import Completion, Request, TokenLogprob


class BackendError(RuntimeError):
    """An engine refused or failed a request; the message names the request."""


class Backend(ABC):
    """Requests in, Completions out. Use as a context manager so the engine is released."""

    name = "base"
    device = "cpu"  # where the engine computes; recorded in provenance (hf/vllm set their own)
    # Engine settings that change only how fast an engine runs or how much memory it takes,
    # not what it can serve or generate: labels of a cell that differ only in these share one
    # engine (retrace.planning.cells.engine_identity). Of those, `memory_settings` are its memory share:
    # the shared engine takes the smallest any label asks, so what one label keeps free (a
    # reward model beside it) stays free.
    capacity_settings: frozenset[str] = frozenset(
        {"n_threads", "batch_size", "max_in_flight", "throughput_tok_s", "gpu_memory_gb"}
    )
    memory_settings: tuple[str, ...] = ()
    # The keys of config/backend/<name>.yaml's `engine:` block and what each takes (the kinds of
    # retrace.config.settings: "int", "number", "bool", "str", "str_or_null", ...): the generate
    # stage checks a job's engine block against them once (retrace.config.settings.
    # backend_settings). Read from the class itself (`engine_keys`): a subclass states its own.
    engine_kinds: dict[str, str] | None = None

    @classmethod
    def engine_keys(cls) -> dict[str, str] | None:
        """This class's own `engine_kinds` (not a parent's: its engine block is its own); None:
        not stated, the block is left unchecked."""
        return cls.engine_kinds if "engine_kinds" in vars(cls) else None

    def __init__(self, model: dict, engine: dict | None = None):
        self.model = model
        self.engine = dict(engine or {})

    @property
    def deterministic(self) -> bool:
        """`engine.deterministic`: run so that a fixed seed gives the same bytes on a rerun."""
        return is_deterministic(self.engine)

    @abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        """Run `requests` (in any internal order) and return completions in input order."""

    def submit(self, request: Request) -> Future | None:
        """Start one request and return its Future, for engines that take requests one by one
        and keep their own slots busy (retrace.engine.scheduler); None: this engine batches
        synchronously, so the scheduler hands it waves of `generate` calls instead."""
        return None

    def batch_size(self) -> int:
        """How many requests a synchronous engine gets per `generate` call (every
        config/backend/*.yaml states `batch_size`)."""
        return int(self.engine["batch_size"])

    @classmethod
    def identity(cls, model: dict, engine: dict) -> dict:
        """What, beyond the weights and the request, decides outputs: part of every cache key.

        A classmethod so the cache can be consulted without starting the engine."""
        ident = {"backend": cls.name, "chat_template": model.get("chat_template") or "embedded"}
        if is_deterministic(engine):
            # A cached completion says whether it can be regenerated bit for bit; the key
            # only gains the field when the mode is on, so existing caches keep their keys.
            ident["deterministic"] = True
        return ident

    @classmethod
    def rerun_settings(cls, engine: dict) -> dict:
        """The engine settings that change what is generated, as opposed to how fast (slots,
        threads, batch sizes): part of each generation job's rerun key (retrace.planning.plan, the ART
        and DRR keys), so changing one reruns the jobs. Default: the deterministic mode, when on
        (absent when off, so existing runs keep their keys)."""
        return {"deterministic": True} if is_deterministic(engine) else {}

    def close(self) -> None:
        """Release the engine (idempotent)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def is_deterministic(engine: dict | None) -> bool:
    """Whether an engine config asks for bitwise-repeatable outputs (`deterministic: true`)."""
    value = (engine or {}).get("deterministic", False)
    if not isinstance(value, bool):
        raise BackendError(f"backend.engine.deterministic must be true or false, got {value!r}")
    return value


def messages_payload(request: Request) -> list[dict]:
    return [{"role": m.role, "content": m.content} for m in request.messages]


def openai_sampling(request: Request) -> dict:
    """OpenAI-compatible sampling fields for one request (llama.cpp and vLLM servers accept them)."""
    s = request.sampling
    body: dict[str, object] = {
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_tokens": s.max_tokens,
        "seed": s.seed,
    }
    if s.top_k > 0:
        body["top_k"] = s.top_k
    if s.stop:
        body["stop"] = list(s.stop)
    if s.logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = s.logprobs
    if s.ignore_eos:
        # Not in OpenAI's API: llama.cpp's server and vLLM's accept it (generate to max_tokens).
        body["ignore_eos"] = True
    return body


def parse_logprobs(block: dict | None) -> tuple[TokenLogprob, ...] | None:
    """Parse an OpenAI chat-style `logprobs.content` list."""
    if not block or block.get("content") is None:
        return None
    return tuple(
        TokenLogprob(
            t["token"],
            float(t["logprob"]),
            tuple((a["token"], float(a["logprob"])) for a in t.get("top_logprobs") or ()),
        )
        for t in block["content"]
    )


def completion_from_openai(reply: dict, request: Request, latency_s: float) -> Completion:
    """Build a Completion from an OpenAI-style JSON reply with exactly one choice."""
    if "error" in reply or not reply.get("choices"):
        raise BackendError(f"engine error for request tag={request.tag!r}: {reply.get('error', reply)}")
    choice, usage = reply["choices"][0], reply.get("usage") or {}
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    details = usage.get("prompt_tokens_details") or {}
    return Completion(
        text=text or "",
        finish_reason=choice.get("finish_reason") or "unknown",
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        generated_tokens=int(usage.get("completion_tokens", 0)),
        cached_prompt_tokens=int(details.get("cached_tokens") or 0),
        logprobs=parse_logprobs(choice.get("logprobs")),
        latency_s=latency_s,
    )


def drop_echoed_prefill(text: str, request: Request) -> str:
    """The continuation alone, for servers that echo a continued assistant prefix.

    llama.cpp's assistant prefill returns prefix + continuation as the message content,
    while vLLM and transformers return only the continuation; retrace keeps the latter.
    """
    if request.continue_final and request.messages and request.prompt is None:
        prefix = request.messages[-1].content
        if prefix and text.startswith(prefix):
            return text[len(prefix) :]
    return text
