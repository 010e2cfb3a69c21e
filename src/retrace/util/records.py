"""The few records everything passes around: Problem, Sampling, Request, Completion.

All are plain frozen dataclasses that round-trip through JSON (`to_dict`/`from_dict`),
because every one of them ends up in an artifact or a cache row.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


def _plain(obj: Any) -> dict:
    return dataclasses.asdict(obj)


# Field metadata of what a run measures about itself (time taken, whether the request cache or
# the engine served it) as opposed to what it computed: two runs of the same requests may differ
# only in these. Comparisons of results (benchmarks/reliability_kit.py) leave them out.
MEASURED = {"measured": True}


def measured_fields(*types: type) -> set[str]:
    """Names of the MEASURED fields of dataclass `types`."""
    return {f.name for t in types for f in dataclasses.fields(t) if f.metadata.get("measured")}


@dataclass(frozen=True)
class Problem:
    """One benchmark item in the canonical schema shared by every dataset loader.

    `choices` is None for open-ended (maths) problems; for multiple choice, `gold` is the
    letter of the right choice ("A", "B", ...). `metadata` keeps loader extras (level,
    subject, source file and line) and must be JSON-serialisable.
    """

    id: str
    question: str
    gold: str
    choices: tuple[str, ...] | None = None
    metadata: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = _plain(self)
        d["choices"] = list(self.choices) if self.choices is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Problem:
        choices = d.get("choices")
        return cls(
            id=str(d["id"]),
            question=d["question"],
            gold=str(d["gold"]),
            choices=tuple(choices) if choices is not None else None,
            metadata=dict(d.get("metadata") or {}),
        )


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one request (engine settings live in the backend config).

    `logprobs`: None for none, 0 for the chosen tokens only, k>0 for k alternatives too.
    `ignore_eos`: keep generating past end-of-sequence until `max_tokens` (the probe's full
    batch: a slot that stops early idles). Serialised only when set, so no existing request
    key changes.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int = 0
    logprobs: int | None = None
    ignore_eos: bool = False

    def to_dict(self) -> dict:
        d = _plain(self)
        d["stop"] = list(self.stop)
        if not d["ignore_eos"]:
            del d["ignore_eos"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Sampling:
        d = dict(d)
        d["stop"] = tuple(d.get("stop") or ())
        return cls(**d)


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Request:
    """One generation: a chat history (or a raw prompt) plus sampling.

    `continue_final`: the last message is a partial assistant turn to be continued
    verbatim (pause at a tool call, then resume from that prefix). Methods build
    histories append-only so an engine's prefix cache can reuse the shared prefix.
    `sample_index` separates the N samples of one prompt in the cache key.
    `tag` is free-form bookkeeping for the caller (not part of the cache key).
    """

    messages: tuple[Message, ...] = ()
    sampling: Sampling = Sampling()
    sample_index: int = 0
    prompt: str | None = None
    continue_final: bool = False
    tag: str = ""

    def key_material(self) -> dict:
        """Everything about the request that determines its output (for the cache key)."""
        return {
            "messages": [[m.role, m.content] for m in self.messages],
            "prompt": self.prompt,
            "continue_final": self.continue_final,
            "sampling": self.sampling.to_dict(),
            "sample_index": self.sample_index,
        }


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one Request.

    Token counts are measured by the engine: `prompt_tokens` includes
    `cached_prompt_tokens` (prompt tokens whose KV the engine reused).
    `cache_hit` is True when retrace's request cache served it (no engine work).
    """

    text: str
    finish_reason: str
    prompt_tokens: int
    generated_tokens: int
    cached_prompt_tokens: int = 0
    logprobs: tuple[TokenLogprob, ...] | None = None
    latency_s: float = field(default=0.0, metadata=MEASURED)
    cache_hit: bool = field(default=False, metadata=MEASURED)
    key: str = ""

    def to_dict(self) -> dict:
        d = _plain(self)
        if self.logprobs is not None:
            d["logprobs"] = [[t.token, t.logprob, [list(x) for x in t.top]] for t in self.logprobs]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Completion:
        d = dict(d)
        if d.get("logprobs") is not None:
            d["logprobs"] = tuple(
                TokenLogprob(t, lp, tuple(tuple(x) for x in top)) for t, lp, top in d["logprobs"]
            )
        return cls(**d)
