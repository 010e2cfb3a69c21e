"""The transformers backend on the real SmolLM2 weights (dequantized from its GGUF)."""

from __future__ import annotations

import pytest

from retrace.backends.base import BackendError
from retrace.util.records import Message, Request, Sampling

pytestmark = pytest.mark.slow


def chat(text: str, **sampling) -> Request:
    return Request(messages=(Message("user", text),), sampling=Sampling(**sampling))


def test_registered_under_hf():
    from retrace.backends.hf import HFBackend
    from retrace.util.registry import BACKENDS

    assert BACKENDS.get("hf") is HFBackend


def test_model_source_prefers_hf_dir_then_gguf_then_hub():
    from retrace.backends.hf import model_source

    assert model_source({"hf_dir": "/m", "gguf": "/g/x.gguf"}) == ("/m", {})
    assert model_source({"hub": {"repo": "o/r", "revision": "abc"}}) == ("o/r", {"revision": "abc"})
    assert model_source({"gguf": "/g/x.gguf"}) == ("/g", {"gguf_file": "x.gguf"})
    # a materialised GGUF model keeps its config's hub block (its upstream): the file wins
    both = {"gguf": "/g/x.gguf", "hub": {"repo": "o/r", "revision": None}}
    assert model_source(both) == ("/g", {"gguf_file": "x.gguf"})
    with pytest.raises(BackendError):
        model_source({"name": "nothing"})


def test_greedy_chat_answers_and_counts_tokens(hf_smollm2):
    [c] = hf_smollm2.generate([chat("What is the capital of France?", max_tokens=24)])
    assert "Paris" in c.text
    assert c.finish_reason == "stop"  # it ends its turn with <|im_end|> well before 24 tokens
    assert c.prompt_tokens == len(hf_smollm2.prompt_ids(chat("What is the capital of France?")))
    assert 0 < c.generated_tokens < 24 and c.cached_prompt_tokens == 0


def test_max_tokens_gives_length(hf_smollm2):
    [c] = hf_smollm2.generate([chat("Write a long story about a dragon.", max_tokens=5)])
    assert c.finish_reason == "length" and c.generated_tokens == 5


def test_ignore_eos_generates_the_whole_budget(hf_smollm2):
    [c] = hf_smollm2.generate([chat("What is the capital of France?", max_tokens=30, ignore_eos=True)])
    assert c.finish_reason == "length" and c.generated_tokens == 30


def test_stop_string_truncates(hf_smollm2):
    [full] = hf_smollm2.generate([chat("Count from 1 to 10, separated by commas.", max_tokens=40)])
    assert "5" in full.text, full.text
    [cut] = hf_smollm2.generate(
        [chat("Count from 1 to 10, separated by commas.", max_tokens=40, stop=("5",))]
    )
    assert cut.finish_reason == "stop" and "5" not in cut.text
    assert full.text.startswith(cut.text) and len(cut.text) < len(full.text)


def test_logprobs_of_chosen_tokens_and_alternatives(hf_smollm2):
    [c] = hf_smollm2.generate([chat("Name a colour.", max_tokens=6, logprobs=3)])
    assert c.logprobs is not None and len(c.logprobs) == c.generated_tokens
    for t in c.logprobs:
        assert t.logprob <= 0 and len(t.top) == 3
        assert [lp for _, lp in t.top] == sorted((lp for _, lp in t.top), reverse=True)
        # Greedy: the chosen token is the best alternative.
        assert t.top[0] == (t.token, pytest.approx(t.logprob))
    [plain] = hf_smollm2.generate([chat("Name a colour.", max_tokens=6)])
    assert plain.logprobs is None and plain.text == c.text


def test_seed_reproducible_and_seeds_differ(hf_smollm2):
    reqs = [chat("Tell me a story.", max_tokens=16, temperature=1.0, seed=s) for s in (1, 1, 2, 3)]
    a, b, c, d = hf_smollm2.generate(reqs)
    assert a.text == b.text
    assert len({a.text, c.text, d.text}) >= 2


def test_continue_final_continues_the_prefix(hf_smollm2):
    prefix = "The capital of France is"
    req = Request(
        messages=(Message("user", "What is the capital of France?"), Message("assistant", prefix)),
        continue_final=True,
        sampling=Sampling(max_tokens=8),
    )
    ids = hf_smollm2.prompt_ids(req)
    # The prompt ends with the prefix itself: no end-of-turn, no new assistant header.
    assert hf_smollm2.tokenizer.decode(ids).endswith(prefix)
    [c] = hf_smollm2.generate([req])
    assert "Paris" in c.text


def test_raw_prompt_and_multi_turn(hf_smollm2):
    raw = Request(prompt="The capital of France is", sampling=Sampling(max_tokens=4))
    turns = Request(
        messages=(
            Message("system", "Answer with one word."),
            Message("user", "Capital of France?"),
            Message("assistant", "Paris"),
            Message("user", "Capital of Italy?"),
        ),
        sampling=Sampling(max_tokens=8),
    )
    r, t = hf_smollm2.generate([raw, turns])
    assert r.prompt_tokens == 5 and "Paris" in r.text
    rendered = hf_smollm2.tokenizer.decode(hf_smollm2.prompt_ids(turns))
    # Every turn is in the prompt, in order, and the reply is a short answer about Italy.
    positions = [rendered.index(s) for s in ("one word", "France?", "Paris", "Italy?")]
    assert positions == sorted(positions) and rendered.endswith("assistant\n")
    assert t.finish_reason == "stop" and ("Rome" in t.text or "Ital" in t.text), t.text


def test_batched_equals_one_by_one(hf_smollm2):
    reqs = [chat(q, max_tokens=12) for q in ("Hi!", "What is 2+2?", "Name a fruit, please, any fruit.")]
    together = hf_smollm2.generate(reqs)
    alone = [hf_smollm2.generate([r])[0] for r in reqs]
    assert [c.text for c in together] == [c.text for c in alone]
