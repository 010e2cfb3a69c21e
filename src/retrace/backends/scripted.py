"""A scripted fake engine, for unit tests only: it loads no model and answers from a script.

    from retrace.registry import BACKENDS
    Scripted = BACKENDS.get("scripted")
    Scripted(manifest, {"script": ["a", "b"]})               # texts handed out in turn
    Scripted(manifest, {"script": {"2+3": r"\\boxed{5}"}})    # first key found in the last
                                                              # user message wins ("" = default)
    Scripted(manifest, {"script": ["a", "b"], "seeded": True})  # text chosen by (seed, sample_index)

A script value may itself be a list (cycled, or chosen by seed when seeded). Token counts
are whitespace word counts. Stop strings cut the text before the first one found
(finish_reason "stop"); more than `max_tokens` words are cut to `max_tokens` (finish_reason
"length"). Engine key `fail_on_call: k` raises BackendError on the k-th generate() call.

Counters: `calls` and `requests_seen` per instance; `ScriptedBackend.requests_total`
across all instances (take a difference: it is never reset).
"""
from __future__ import annotations

import hashlib
import re
from typing import Sequence

from retrace.backends.base import Backend, BackendError
from retrace.records import Completion, Request, TokenLogprob
from retrace.registry import BACKENDS

WORD = re.compile(r"\S+")


def words(text: str) -> int:
    return len(WORD.findall(text))


def last_user_text(request: Request) -> str:
    if request.prompt is not None:
        return request.prompt
    users = [m.content for m in request.messages if m.role == "user"]
    return users[-1] if users else ""


def truncate(text: str, stop: Sequence[str], max_tokens: int) -> tuple[str, str]:
    """(text, finish_reason) as an engine would end it: at a stop string or at max_tokens words."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    if cuts:
        text = text[:min(cuts)]
    spans = list(WORD.finditer(text))
    if len(spans) > max_tokens:
        return text[:spans[max_tokens - 1].end()] if max_tokens > 0 else "", "length"
    return text, "stop"


@BACKENDS.register("scripted")
class ScriptedBackend(Backend):
    """Answers requests from `engine["script"]`; see the module docstring."""

    name = "scripted"
    requests_total = 0  # across instances: how many requests reached any scripted engine

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        if "script" not in self.engine:
            raise BackendError("scripted backend needs engine['script'] (a list or a dict)")
        self.calls = 0
        self.requests_seen: list[Request] = []
        self._turns: dict[str | None, int] = {}

    def _pick(self, slot: str | None, options, request: Request) -> str:
        if isinstance(options, str):
            return options
        options = list(options)
        if self.engine.get("seeded"):
            digest = hashlib.sha256(f"{request.sampling.seed}:{request.sample_index}".encode()).digest()
            return options[int.from_bytes(digest[:4], "big") % len(options)]
        turn = self._turns.get(slot, 0)
        self._turns[slot] = turn + 1
        return options[turn % len(options)]

    def _text(self, request: Request) -> str:
        script = self.engine["script"]
        if not isinstance(script, dict):
            return self._pick(None, script, request)
        user = last_user_text(request)
        for key, options in script.items():
            if key in user:
                return self._pick(key, options, request)
        raise BackendError(f"scripted backend: no script key found in request tag={request.tag!r} "
                           f"(keys: {list(script)})")

    def _complete(self, request: Request) -> Completion:
        s = request.sampling
        text, finish = truncate(self._text(request), s.stop, s.max_tokens)
        prompt = request.prompt if request.prompt is not None else \
            " ".join(m.content for m in request.messages)
        logprobs = None
        if s.logprobs is not None:
            logprobs = tuple(TokenLogprob(w, 0.0) for w in WORD.findall(text))
        return Completion(text=text, finish_reason=finish, prompt_tokens=words(prompt),
                          generated_tokens=words(text), logprobs=logprobs)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        self.calls += 1
        if self.engine.get("fail_on_call") == self.calls:
            raise BackendError(f"scripted backend: failing call {self.calls} as scripted")
        out = [self._complete(r) for r in requests]
        self.requests_seen.extend(requests)
        ScriptedBackend.requests_total += len(requests)
        return out
