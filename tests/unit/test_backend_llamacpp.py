"""The in-process llama.cpp backend on a real small model (SmolLM2-135M)."""

from __future__ import annotations

import pytest

from retrace.util.records import Message, Request, Sampling

pytestmark = pytest.mark.slow


def _chat(text, **sampling):
    return Request(messages=(Message("user", text),), sampling=Sampling(**sampling))


def test_greedy_is_repeatable_and_counts_tokens(llamacpp_smollm2_det):
    req = _chat("Name a colour.", max_tokens=12)
    a, b = llamacpp_smollm2_det.generate([req, req])
    assert a.text == b.text and a.text.strip()
    assert a.prompt_tokens > 5 and 0 < a.generated_tokens <= 12
    assert a.finish_reason in ("stop", "length")


def test_max_tokens_gives_length_and_stop_string_gives_stop(llamacpp_smollm2):
    (long,) = llamacpp_smollm2.generate([_chat("List the numbers from 1 to 20.", max_tokens=5)])
    assert long.finish_reason == "length" and long.generated_tokens == 5
    (stopped,) = llamacpp_smollm2.generate(
        [_chat("List the numbers from 1 to 20.", max_tokens=60, stop=("5",))]
    )
    assert stopped.finish_reason == "stop" and "5" not in stopped.text


def test_ignore_eos_generates_the_whole_budget(llamacpp_smollm2):
    # The probe's full batch: without ignore_eos the model ends its short answer early.
    (short,) = llamacpp_smollm2.generate([_chat("Say OK.", max_tokens=40)])
    assert short.finish_reason == "stop" and short.generated_tokens < 40
    (full,) = llamacpp_smollm2.generate([_chat("Say OK.", max_tokens=40, ignore_eos=True)])
    assert full.finish_reason == "length" and full.generated_tokens == 40


def test_continue_final_returns_only_the_continuation(llamacpp_smollm2):
    prefix = "The capital of France is"
    req = Request(
        messages=(Message("user", "Complete the sentence."), Message("assistant", prefix)),
        continue_final=True,
        sampling=Sampling(max_tokens=4),
    )
    (out,) = llamacpp_smollm2.generate([req])
    assert not out.text.startswith(prefix)
    # the shared prefix was reused from the engine's KV cache on a second identical call
    (again,) = llamacpp_smollm2.generate([req])
    assert again.cached_prompt_tokens > 0


def test_logprobs_and_seeds(llamacpp_smollm2_det):
    reqs = [
        _chat("Say a random word.", temperature=1.0, max_tokens=8, seed=s, logprobs=2) for s in (1, 1, 2, 3)
    ]
    outs = llamacpp_smollm2_det.generate(reqs)
    assert outs[0].text == outs[1].text
    assert len({o.text for o in outs}) >= 2
    assert all(t.logprob <= 0 and len(t.top) == 2 for t in outs[0].logprobs)


def test_deterministic_mode_repeats_bytes_across_engines_and_batches(llamacpp_smollm2_det, smollm2_manifest):
    """The mode's promise: a fixed seed gives the same bytes on a fresh engine, whatever else
    was submitted in the same call (the order and company of requests differ here)."""
    from retrace.backends.llamacpp import LlamaCppBackend

    reqs = [
        _chat(f"Tell me a story about {w}.", temperature=1.0, max_tokens=12, seed=s)
        for s, w in enumerate(("a cat", "a ship", "rain", "a key"))
    ]
    first = llamacpp_smollm2_det.generate(reqs)
    with LlamaCppBackend(
        smollm2_manifest,
        {
            "n_parallel": 8,
            "n_ctx": 4096,
            "n_threads": 2,
            "n_batch": 512,
            "cache_prompt": True,
            "deterministic": True,
        },
    ) as fresh:
        assert fresh.slots == 1
        again = fresh.generate(list(reversed(reqs)) + reqs[:1])
    assert [c.text for c in reversed(again[:4])] == [c.text for c in first]
    assert again[4].text == first[0].text
    assert all(c.cached_prompt_tokens == 0 for c in again)  # no KV prefix reuse


def test_deterministic_mode_is_part_of_the_cache_identity():
    from retrace.backends.base import BackendError, is_deterministic
    from retrace.backends.llamacpp import LlamaCppBackend, effective_slots, prompt_cache_on

    plain = LlamaCppBackend.identity({}, {"n_parallel": 4})
    det = LlamaCppBackend.identity({}, {"n_parallel": 4, "deterministic": True})
    assert "deterministic" not in plain and det["deterministic"] is True
    assert (
        effective_slots({"n_parallel": 4}) == 4
        and effective_slots({"n_parallel": 4, "deterministic": True}) == 1
    )
    assert prompt_cache_on({"cache_prompt": True}) and not prompt_cache_on(
        {"cache_prompt": True, "deterministic": True}
    )
    with pytest.raises(BackendError, match="deterministic"):
        is_deterministic({"deterministic": "yes"})


def test_probe_times_decoding_with_its_prompts_already_cached(llamacpp_smollm2):
    # The probe's rate is the engine's full-batch *decode* rate: its untimed one-token batch
    # leaves each slot holding the prompt, so the timed batch does not prefill 99 tokens a slot.
    from retrace.stages import probe

    result = probe.measure(llamacpp_smollm2, tokens=12)
    assert result["requests"] == 2 and result["full_share"] == 1.0
    assert result["generated_tokens"] == 2 * 12
    assert result["decode_cached_share"] >= 0.9, result
