"""The in-process llama.cpp backend on a real small model (SmolLM2-135M)."""
from __future__ import annotations

import pytest

from retrace.records import Message, Request, Sampling

pytestmark = pytest.mark.slow


def _chat(text, **sampling):
    return Request(messages=(Message("user", text),), sampling=Sampling(**sampling))


def test_greedy_is_repeatable_and_counts_tokens(llamacpp_smollm2):
    req = _chat("Name a colour.", max_tokens=12)
    a, b = llamacpp_smollm2.generate([req, req])
    assert a.text == b.text and a.text.strip()
    assert a.prompt_tokens > 5 and 0 < a.generated_tokens <= 12
    assert a.finish_reason in ("stop", "length")


def test_max_tokens_gives_length_and_stop_string_gives_stop(llamacpp_smollm2):
    long, = llamacpp_smollm2.generate([_chat("Count from 1 to 50, separated by commas.", max_tokens=5)])
    assert long.finish_reason == "length" and long.generated_tokens == 5
    stopped, = llamacpp_smollm2.generate([_chat("Count from 1 to 50, separated by commas.",
                                                max_tokens=60, stop=("5",))])
    assert stopped.finish_reason == "stop" and "5" not in stopped.text


def test_continue_final_returns_only_the_continuation(llamacpp_smollm2):
    prefix = "The capital of France is"
    req = Request(messages=(Message("user", "Complete the sentence."), Message("assistant", prefix)),
                  continue_final=True, sampling=Sampling(max_tokens=4))
    out, = llamacpp_smollm2.generate([req])
    assert not out.text.startswith(prefix)
    # the shared prefix was reused from the engine's KV cache on a second identical call
    again, = llamacpp_smollm2.generate([req])
    assert again.cached_prompt_tokens > 0


def test_logprobs_and_seeds(llamacpp_smollm2):
    reqs = [_chat("Say a random word.", temperature=1.0, max_tokens=8, seed=s, logprobs=2) for s in (1, 1, 2, 3)]
    outs = llamacpp_smollm2.generate(reqs)
    assert outs[0].text == outs[1].text
    assert len({o.text for o in outs}) >= 2
    assert all(t.logprob <= 0 and len(t.top) == 2 for t in outs[0].logprobs)
