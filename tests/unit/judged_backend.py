"""A scripted backend whose answers come from a function, with controllable judge logprobs.

    llm, engines = judged_llm(tmp_path, respond)   # respond(request) -> str | float
A str is the completion text (cut at stop strings / max_tokens as the scripted backend does);
a float p (for a request with sampling.logprobs set) is a judge verdict: text "Yes" whose
first token has top logprobs [("Yes", log p), ("No", log(1 - p))].
Shares the scripted backend's cache identity, so it can read a cache a scripted run wrote.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from fake_backend import manifest

from retrace.backends.scripted import ScriptedBackend, words
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from retrace.util.records import Completion, Request, TokenLogprob


def is_judge(request: Request) -> bool:
    return request.tag.startswith("judge:")


def verdict(p: float) -> tuple[TokenLogprob, ...]:
    def lp(x: float) -> float:
        return math.log(x) if x > 0 else float("-inf")

    return (TokenLogprob("Yes", lp(p), (("Yes", lp(p)), ("No", lp(1 - p)))),)


class JudgedBackend(ScriptedBackend):
    def _text(self, request: Request):
        return self.engine["respond"](request)

    def _complete(self, request: Request) -> Completion:
        answer = self._text(request)
        if isinstance(answer, float):
            prompt = " ".join(m.content for m in request.messages)
            return Completion(
                text="Yes",
                finish_reason="length",
                prompt_tokens=words(prompt),
                generated_tokens=1,
                logprobs=verdict(answer),
            )
        return super()._complete(request)


def judged_llm(
    cache: Path | RequestCache, respond: Callable[[Request], object], **engine
) -> tuple[CachedLLM, list[JudgedBackend]]:
    """`engine`: more engine keys of the scripted backend (e.g. async=True, batch_size=3)."""
    if not isinstance(cache, RequestCache):
        cache = RequestCache(Path(cache) / "requests.sqlite", job="test")
    engines: list[JudgedBackend] = []

    def factory() -> JudgedBackend:
        engines.append(JudgedBackend(manifest(), {"script": [""], "respond": respond, **engine}))
        return engines[-1]

    return CachedLLM(factory, "scripted", manifest(), cache), engines
