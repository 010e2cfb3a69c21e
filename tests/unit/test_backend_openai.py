"""The OpenAI-compatible backend against a real llama.cpp server on 127.0.0.1 (no mocks).

The server is the in-process llama.cpp engine of `llamacpp_smollm2`; its HTTP address is
what `vllm serve` or `llama-server` would expose.
"""

from __future__ import annotations

import pytest

from retrace.backends.base import BackendError
from retrace.util.records import Message, Request, Sampling

pytestmark = pytest.mark.slow
pytest.importorskip("openai")


def chat(text: str, **sampling) -> Request:
    return Request(messages=(Message("user", text),), sampling=Sampling(**sampling))


# What a client states beside its base_url (config/backend/openai.yaml states each key), at the
# values these tests have always run with.
CLIENT = {"server": "llamacpp", "concurrency": 8, "timeout_s": 600, "max_retries": 2}


@pytest.fixture(scope="module")
def remote(llamacpp_smollm2, smollm2_manifest):
    from retrace.backends.openai import OpenAIBackend

    backend = OpenAIBackend(
        smollm2_manifest,
        {
            **CLIENT,
            "base_url": llamacpp_smollm2.url + "/v1",
            "concurrency": 2,
            "timeout_s": 60,
            "max_retries": 0,
        },
    )
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def remote_det(llamacpp_smollm2_det, smollm2_manifest):
    """The client in deterministic mode, on the one-slot deterministic engine's server."""
    from retrace.backends.openai import OpenAIBackend

    backend = OpenAIBackend(
        smollm2_manifest,
        {
            **CLIENT,
            "base_url": llamacpp_smollm2_det.url + "/v1",
            "concurrency": 4,
            "timeout_s": 60,
            "max_retries": 0,
            "deterministic": True,
        },
    )
    yield backend
    backend.close()


def test_greedy_matches_in_process_llamacpp(remote_det, llamacpp_smollm2_det):
    # Both sides deterministic: over HTTP and in process, each request runs alone in the one
    # slot with no reused KV, so the same greedy bytes are what the engine guarantees.
    reqs = [
        chat(q, max_tokens=16)
        for q in ("What is 2+2?", "Name three colours.", "What is the capital of France?", "Say hello.")
    ]
    reqs.append(Request(prompt="The capital of France is", sampling=Sampling(max_tokens=6)))
    over_http = remote_det.generate(reqs)
    in_process = llamacpp_smollm2_det.generate(reqs)
    assert [c.text for c in over_http] == [c.text for c in in_process]
    assert [c.prompt_tokens for c in over_http] == [c.prompt_tokens for c in in_process]
    assert all(c.prompt_tokens > 0 and c.generated_tokens > 0 for c in over_http)


def test_cached_prompt_tokens_parsed(remote):
    long_q = "Here is a list of fruits: apple, banana, cherry, date, elderberry, fig, grape. Which is red?"
    first, second = (
        remote.generate([chat(long_q, max_tokens=4)]),
        remote.generate([chat(long_q, max_tokens=4)]),
    )
    # llama.cpp reuses the KV of a slot that already holds the same prompt.
    assert first[0].prompt_tokens == second[0].prompt_tokens
    assert 0 < second[0].cached_prompt_tokens < second[0].prompt_tokens


def test_length_and_stop(remote):
    [long] = remote.generate([chat("Write a long story about a dragon.", max_tokens=5)])
    assert long.finish_reason == "length" and long.generated_tokens == 5
    [full] = remote.generate([chat("Count from 1 to 10, separated by commas.", max_tokens=40)])
    [cut] = remote.generate([chat("Count from 1 to 10, separated by commas.", max_tokens=40, stop=("5",))])
    assert "5" in full.text and "5" not in cut.text
    assert cut.finish_reason == "stop" and full.text.startswith(cut.text)


def test_logprobs_chat_and_raw_prompt(remote):
    c, r = remote.generate(
        [
            chat("Name a colour.", max_tokens=5, logprobs=2),
            Request(prompt="The capital of France is", sampling=Sampling(max_tokens=3, logprobs=0)),
        ]
    )
    for comp, k in ((c, 2), (r, 0)):
        assert comp.logprobs is not None and len(comp.logprobs) == comp.generated_tokens
        assert all(t.logprob <= 0 and len(t.top) == k for t in comp.logprobs)
    assert "".join(t.token for t in r.logprobs) == r.text


def test_seed_reproducible_and_seeds_differ(remote_det):
    reqs = [chat("Tell me a story.", max_tokens=16, temperature=1.0, seed=s) for s in (7, 7, 8, 9)]
    a, b, c, d = remote_det.generate(reqs)
    assert a.text == b.text
    assert len({a.text, c.text, d.text}) >= 2


def test_continue_final_uses_assistant_prefill(remote):
    req = Request(
        messages=(
            Message("user", "What is the capital of France?"),
            Message("assistant", "The capital of France is"),
        ),
        continue_final=True,
        sampling=Sampling(max_tokens=6),
    )
    [c] = remote.generate([req])
    # A fresh turn would start "The capital..."; a continuation goes on from the prefix.
    assert "Paris" in c.text and not c.text.lstrip().startswith("The capital")


def test_vllm_flags_sent_only_for_vllm(remote, llamacpp_smollm2, smollm2_manifest):
    from retrace.backends.openai import OpenAIBackend

    sent = {}
    backend = OpenAIBackend(
        smollm2_manifest, {**CLIENT, "base_url": llamacpp_smollm2.url + "/v1", "server": "vllm"}
    )
    original = backend._client.chat.completions.create

    def spy(**kwargs):
        sent.update(kwargs)
        return original(**kwargs)

    backend._client.chat.completions.create = spy
    req = Request(
        messages=(Message("user", "Hi"), Message("assistant", "Hello")),
        continue_final=True,
        sampling=Sampling(max_tokens=2),
    )
    backend.generate([req])
    backend.close()
    assert sent["extra_body"]["continue_final_message"] is True
    assert sent["extra_body"]["add_generation_prompt"] is False


def test_server_down_names_base_url(smollm2_manifest):
    from retrace.backends.llamacpp import _free_port
    from retrace.backends.openai import OpenAIBackend

    url = f"http://127.0.0.1:{_free_port()}/v1"
    with OpenAIBackend(smollm2_manifest, {**CLIENT, "base_url": url, "max_retries": 0, "timeout_s": 5}) as b:
        with pytest.raises(BackendError, match=url.replace(".", r"\.")):
            b.generate([chat("Hi", max_tokens=2)])


def test_http_error_names_base_url_and_status(llamacpp_smollm2, smollm2_manifest):
    from retrace.backends.openai import OpenAIBackend

    url = llamacpp_smollm2.url + "/no-such-prefix/v1"
    with OpenAIBackend(smollm2_manifest, {**CLIENT, "base_url": url, "max_retries": 0}) as b:
        with pytest.raises(BackendError, match=r"HTTP 404"):
            b.generate([chat("Hi", max_tokens=2)])


def test_missing_api_key_env_is_an_error(smollm2_manifest, monkeypatch):
    from retrace.backends.openai import OpenAIBackend

    monkeypatch.delenv("RETRACE_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(BackendError, match="RETRACE_TEST_NO_SUCH_KEY"):
        OpenAIBackend(
            smollm2_manifest,
            {**CLIENT, "base_url": "http://127.0.0.1:1/v1", "api_key_env": "RETRACE_TEST_NO_SUCH_KEY"},
        )


def test_legacy_completions_logprobs_layout():
    from retrace.backends.openai import parse_any_logprobs

    block = {
        "tokens": [" Paris", "."],
        "token_logprobs": [-0.1, -0.5],
        "top_logprobs": [{" Paris": -0.1, " the": -2.0}, {".": -0.5, ",": -1.5}],
    }
    got = parse_any_logprobs(block, 1)
    assert [(t.token, t.logprob, t.top) for t in got] == [
        (" Paris", -0.1, ((" Paris", -0.1),)),
        (".", -0.5, ((".", -0.5),)),
    ]
    assert parse_any_logprobs(block, None) is None
