"""CachedLLM (retrace.engine.llm): cached requests never reach the engine, batches commit one by one."""

from __future__ import annotations

import pytest
from fake_backend import chat, engine_requests, manifest, scripted_llm

from retrace.backends.base import BackendError
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache

SCRIPT = {"apples": "I count seven apples", "eggs": "thirty eggs", "cats": "two"}


def test_second_generate_is_served_from_the_cache(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": SCRIPT})
    reqs = [chat("apples?"), chat("eggs?"), chat("cats?")]
    first = llm.generate(reqs)
    second = llm.generate(reqs)
    assert len(engine_requests(engines)) == 3
    assert (
        [c.text for c in second] == [c.text for c in first] == ["I count seven apples", "thirty eggs", "two"]
    )
    assert not any(c.cache_hit for c in first) and all(c.cache_hit for c in second)
    assert [c.key for c in second] == [c.key for c in first] == [llm.key(r) for r in reqs]
    assert llm.cache.hits_for("test") == 3


def test_engine_is_not_constructed_when_everything_is_cached(tmp_path):
    warm, _ = scripted_llm(tmp_path, {"script": SCRIPT})
    reqs = [chat("apples?"), chat("eggs?")]
    expected = [c.text for c in warm.generate(reqs)]

    def factory():
        raise AssertionError("the engine must not be loaded when every request is cached")

    cold = CachedLLM(factory, "scripted", manifest(), warm.cache)
    assert [c.text for c in cold.generate(reqs)] == expected
    assert cold.usage.engine_loads == 0 and cold.usage.cache_hits == 2


def test_engine_is_constructed_once_for_many_misses(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": ["x"], "batch_size": 2})
    llm.generate([chat(f"q{i}") for i in range(5)])
    llm.generate([chat("another")])
    assert len(engines) == 1 and llm.usage.engine_loads == 1
    assert engines[0].calls == 4  # batches of 2, 2, 1, then 1


def test_only_misses_reach_the_engine(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": SCRIPT})
    llm.generate([chat("apples?")])
    out = llm.generate([chat("eggs?"), chat("apples?"), chat("cats?")])
    assert [r.tag for r in engine_requests(engines)] == ["apples?", "eggs?", "cats?"]
    assert [c.cache_hit for c in out] == [False, True, False]
    assert [c.text for c in out] == ["thirty eggs", "I count seven apples", "two"]


def test_batches_are_committed_one_by_one(tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite", job="test")
    reqs = [chat(f"apples {i}") for i in range(5)]
    crashing, _ = scripted_llm(cache, {"script": SCRIPT, "batch_size": 2, "fail_on_call": 2})
    with pytest.raises(BackendError):
        crashing.generate(reqs)
    assert set(cache.get_many([crashing.key(r) for r in reqs])) == {crashing.key(r) for r in reqs[:2]}

    retry, engines = scripted_llm(cache, {"script": SCRIPT, "batch_size": 2})
    out = retry.generate(reqs)
    assert [r.tag for r in engine_requests(engines)] == [r.tag for r in reqs[2:]]
    assert [c.cache_hit for c in out] == [True, True, False, False, False]
    assert cache.count() == 5


def test_duplicate_requests_in_one_call_run_once(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": ["a", "b"]})
    out = llm.generate([chat("same"), chat("same"), chat("other")])
    assert len(engine_requests(engines)) == 2
    assert out[0].text == out[1].text and llm.usage.requests == 3


def test_usage_separates_engine_work_from_method_compute(tmp_path):
    llm, _ = scripted_llm(tmp_path, {"script": SCRIPT})
    llm.generate([chat("apples one two"), chat("eggs")])  # prompts of 3 and 1 words
    llm.generate([chat("apples one two"), chat("cats")])  # first is a hit
    u = llm.usage
    assert (u.requests, u.cache_hits, u.engine_loads) == (4, 1, 1)
    assert u.prompt_tokens_all == 3 + 1 + 3 + 1
    assert u.generated_tokens_all == 4 + 2 + 4 + 1
    assert u.engine_prompt_tokens == 3 + 1 + 1
    assert u.engine_generated_tokens == 4 + 2 + 1


def test_model_fingerprint_and_chat_template_separate_cache_entries(tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    a, _ = scripted_llm(cache, {"script": ["from a"]})
    a.generate([chat("q")])
    for other_model in (manifest(fingerprint="0" * 64), manifest(chat_template="{{ messages }}")):
        b, engines = scripted_llm(cache, {"script": ["from b"]}, model=other_model)
        assert b.generate([chat("q")])[0].text == "from b"
        assert len(engine_requests(engines)) == 1


def test_close_releases_and_a_later_miss_reloads(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": ["x"]})
    llm.generate([chat("a")])
    llm.close()
    llm.generate([chat("b")])
    assert len(engines) == 2 and llm.usage.engine_loads == 2


def test_a_request_another_job_published_meanwhile_is_not_generated(tmp_path):
    # Two jobs sharing one cache: the lookup is repeated before each batch, so the race
    # window is one batch, not the whole job.
    from retrace.util.records import Completion

    cache = RequestCache(tmp_path / "requests", job="test")
    llm, engines = scripted_llm(cache, {"script": SCRIPT, "batch_size": 1})
    reqs = [chat("apples?"), chat("eggs?")]
    other = RequestCache(tmp_path / "requests", job="other")
    publish = cache.put_many

    def publish_then_the_other_job_does(items, **kw):
        publish(items, **kw)
        other.put_many([(llm.key(reqs[1]), reqs[1], Completion("from the other job", "stop", 1, 1))])

    cache.put_many = publish_then_the_other_job_does
    out = llm.generate(reqs)
    assert [r.tag for r in engine_requests(engines)] == ["apples?"]
    assert out[1].text == "from the other job" and out[1].cache_hit
    assert cache.duplicates() == [] and llm.usage.cache_hits == 1
