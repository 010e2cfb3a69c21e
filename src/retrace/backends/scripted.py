"""A scripted fake engine, for unit tests only: it loads no model and answers from a script.

    from retrace.util.registry import BACKENDS
    Scripted = BACKENDS.get("scripted")
    Scripted(manifest, {"script": ["a", "b"]})               # texts handed out in turn
    Scripted(manifest, {"script": {"2+3": r"\\boxed{5}"}})    # first key found in the last
                                                              # user message wins ("" = default)
    Scripted(manifest, {"script": ["a", "b"], "seeded": True})  # text chosen by (seed, sample_index)

A script value may itself be a list (cycled, or chosen by seed when seeded). Token counts
are whitespace word counts. Stop strings cut the text before the first one found
(finish_reason "stop"); more than `max_tokens` words are cut to `max_tokens` (finish_reason
"length"). Engine key `fail_on_call: k` raises BackendError on the k-th generate() call.

Engine key `async: true` adds `submit` (retrace.engine.scheduler's per-request path): submitted
requests are held and finished from a background timer in an order other than submission
order (ranked by a hash of seed and tag), as a slotted engine's would; results must not
depend on that order, which is what the scheduler tests check. Counters: `calls` and `requests_seen` per instance; `ScriptedBackend.requests_total`
across all instances (take a difference: it is never reset).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from retrace.backends.base import Backend, BackendError
from retrace.util.records import Completion, Request, TokenLogprob
from retrace.util.registry import BACKENDS

WORD = re.compile(r"\S+")
# This fake's optional engine keys (it has no config/backend YAML): requests per `generate`
# call, and held requests in async mode.
DEFAULTS = {"batch_size": 8, "async_window": 3}


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
        text = text[: min(cuts)]
    spans = list(WORD.finditer(text))
    if len(spans) > max_tokens:
        return text[: spans[max_tokens - 1].end()] if max_tokens > 0 else "", "length"
    return text, "stop"


@BACKENDS.register("scripted")
class ScriptedBackend(Backend):
    """Answers requests from `engine["script"]`; see the module docstring."""

    name = "scripted"
    requests_total = 0  # across instances: how many requests reached any scripted engine

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, {**DEFAULTS, **(engine or {})})
        if "script" not in self.engine:
            raise BackendError("scripted backend needs engine['script'] (a list or a dict)")
        self.calls = 0
        self.requests_seen: list[Request] = []
        self._turns: dict[str | None, int] = {}
        self._lock = threading.Lock()
        self._held: list[tuple[Future, Request]] = []  # async: submitted, not yet finished

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
        raise BackendError(
            f"scripted backend: no script key found in request tag={request.tag!r} (keys: {list(script)})"
        )

    def _complete(self, request: Request) -> Completion:
        s = request.sampling
        text, finish = truncate(self._text(request), s.stop, s.max_tokens)
        prompt = (
            request.prompt if request.prompt is not None else " ".join(m.content for m in request.messages)
        )
        logprobs = None
        if s.logprobs is not None:
            logprobs = tuple(TokenLogprob(w, 0.0) for w in WORD.findall(text))
        return Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=words(prompt),
            generated_tokens=words(text),
            logprobs=logprobs,
        )

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        self.calls += 1
        if self.engine.get("fail_on_call") == self.calls:
            raise BackendError(f"scripted backend: failing call {self.calls} as scripted")
        out = [self._complete(r) for r in requests]
        self.requests_seen.extend(requests)
        ScriptedBackend.requests_total += len(requests)
        return out

    def submit(self, request: Request) -> Future | None:
        """Async mode: hold the request; finish the lowest-ranked held one once `async_window`
        are held, and the rest from a timer shortly after."""
        if not self.engine.get("async"):
            return None
        future: Future = Future()
        with self._lock:
            self._held.append((future, request))
            full = len(self._held) >= int(self.engine["async_window"])
        if full:
            self._finish_one()
        threading.Timer(0.001, self._finish_all).start()  # nothing stays held for long
        return future

    def _finish_one(self) -> None:
        with self._lock:
            if not self._held:
                return
            rank = lambda fr: hashlib.sha256(f"{fr[1].sampling.seed}:{fr[1].tag}".encode()).digest()
            future, request = min(self._held, key=rank)
            self._held.remove((future, request))
            try:
                done = self._complete(request)
                self.requests_seen.append(request)
                ScriptedBackend.requests_total += 1
            except Exception as e:
                future.set_exception(e)
                return
        future.set_result(done)

    def _finish_all(self) -> None:
        while self._held:
            self._finish_one()
