"""The scripted backend the other unit tests stand on: scripts, stops, lengths, seeds, counters."""

from __future__ import annotations

import pytest
from fake_backend import chat, manifest

from retrace.backends.base import BackendError
from retrace.backends.scripted import ScriptedBackend
from retrace.util.records import Message, Request, Sampling
from retrace.util.registry import BACKENDS


def scripted(**engine) -> ScriptedBackend:
    return ScriptedBackend(manifest(), engine)


def test_registered_by_name():
    assert BACKENDS.get("scripted") is ScriptedBackend


def test_list_script_is_cycled_and_counts_words():
    b = scripted(script=["one two", "three"])
    out = b.generate([chat("a b c"), chat("d"), chat("e")])
    assert [c.text for c in out] == ["one two", "three", "one two"]
    assert [c.generated_tokens for c in out] == [2, 1, 2]
    assert [c.prompt_tokens for c in out] == [3, 1, 1]
    assert all(not c.cache_hit for c in out)


def test_dict_script_matches_last_user_message():
    b = scripted(script={"apples": "7", "eggs": ["30", "31"], "": "default"})
    history = (Message("user", "apples?"), Message("assistant", "7"), Message("user", "eggs?"))
    out = b.generate([chat("how many apples"), Request(messages=history), chat("eggs"), chat("zzz")])
    assert [c.text for c in out] == ["7", "30", "31", "default"]


def test_dict_script_without_match_names_the_request():
    b = scripted(script={"apples": "7"})
    with pytest.raises(BackendError, match="tag='pears'"):
        b.generate([chat("pears")])


def test_stop_string_cuts_before_the_earliest_stop():
    b = scripted(script=["a b STOP c END d"])
    [c] = b.generate([chat("q", stop=("END", "STOP"), max_tokens=100)])
    assert (c.text, c.finish_reason, c.generated_tokens) == ("a b ", "stop", 2)


def test_max_tokens_truncates_with_length():
    b = scripted(script=["w1 w2  w3 w4"])
    short, exact = b.generate([chat("q", max_tokens=3), chat("q", max_tokens=4)])
    assert (short.text, short.finish_reason, short.generated_tokens) == ("w1 w2  w3", "length", 3)
    assert (exact.text, exact.finish_reason) == ("w1 w2  w3 w4", "stop")


def test_stop_before_the_length_limit_wins():
    b = scripted(script=["a b c d e"])
    [c] = b.generate([chat("q", stop=("c",), max_tokens=3)])
    assert (c.text, c.finish_reason) == ("a b ", "stop")


def test_seeded_text_depends_only_on_seed_and_sample_index():
    texts = [f"t{i}" for i in range(50)]
    reqs = [chat("q", sample_index=i, seed=s) for s in (1, 2) for i in range(4)]
    first = [c.text for c in scripted(script=texts, seeded=True).generate(reqs)]
    b = scripted(script=texts, seeded=True)
    b.generate([chat("warm-up", seed=99)])  # an unseeded script would shift its turn here
    second = [c.text for c in b.generate(list(reversed(reqs)))]
    assert first == list(reversed(second))
    assert len(set(first)) > 4  # not one constant text


def test_counters_count_requests_and_calls():
    before = ScriptedBackend.requests_total
    b = scripted(script=["x"])
    b.generate([chat("a"), chat("b")])
    b.generate([Request(prompt="raw prompt here", sampling=Sampling())])
    assert b.calls == 2
    assert [r.tag for r in b.requests_seen] == ["a", "b", ""]
    assert ScriptedBackend.requests_total - before == 3


def test_fail_on_call_raises_on_that_call_only():
    b = scripted(script=["x"], fail_on_call=2)
    b.generate([chat("a")])
    with pytest.raises(BackendError):
        b.generate([chat("b")])
    assert len(b.generate([chat("c")])) == 1
    assert [r.tag for r in b.requests_seen] == ["a", "c"]


def test_missing_script_is_refused():
    with pytest.raises(BackendError, match="script"):
        ScriptedBackend(manifest(), {})
