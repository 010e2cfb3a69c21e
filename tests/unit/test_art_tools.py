"""ART's tools: BM25 search over the shipped collection, dictionary lookup, code tools."""
import json
from pathlib import Path

import pytest

from retrace.art.program import Step
from retrace.tools import TOOLS
from retrace.tools._interface import ToolCall, tool_name
from retrace.tools.code_exec import run_code, sandbox_problem
from retrace.tools.lookup import DEFAULT_WORDS, WordListMissing, letters_of
from retrace.tools.search import DEFAULT_COLLECTION, bm25_search


def test_tools_are_registered_plugins():
    assert {"search", "lookup", "code_generate", "code_execute"} <= set(TOOLS.names())
    assert tool_name("code execute") == "code_execute" and TOOLS.get("code_execute").executor is run_code


@pytest.mark.parametrize("query, best", [
    ("When was the telegram invented?", "telegram"),
    ("Which deity is the destroyer in the Trimurti?", "trimurti"),
    ("force on a charge in an electric field", "electric-force"),
    ("momentum of a plane mass velocity", "momentum"),
])
def test_bm25_ranks_the_right_passage_first(query, best):
    hits = bm25_search(DEFAULT_COLLECTION, query, top_k=3)
    assert hits[0]["id"] == best
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_every_hit_records_collection_and_version():
    out = TOOLS.get("search")({"top_k": 2})(ToolCall("search", "When did Abraham Lincoln live?"))
    assert out.ok and "1809-1865" in out.text
    assert out.meta["collection"] == "retrace-passages-v1" and len(out.meta["version"]) == 12
    assert out.meta["hits"][0]["id"] == "lincoln" and out.meta["backend"] == "bm25"


def test_search_with_no_match_says_so(tmp_path):
    coll = tmp_path / "c.jsonl"
    coll.write_text(json.dumps({"id": "a", "title": "Cats", "text": "Cats purr."}) + "\n")
    out = TOOLS.get("search")({"collection": str(coll)})(ToolCall("search", "quantum chromodynamics"))
    assert not out.ok and out.text == "No result." and out.meta["hits"] == []


needs_words = pytest.mark.skipif(not DEFAULT_WORDS.is_file(), reason="apt-get install wamerican")


@needs_words
@pytest.mark.parametrize("instruction, words", [
    ('Which English words use exactly the letters "tac"?', {"act", "cat"}),
    ("The word hte is a scrambled version of the English word hte", {"the"}),
    ('Which English words use exactly the letters "oaltytl"?', {"totally"}),
])
def test_lookup_unscrambles_words(instruction, words):
    out = TOOLS.get("lookup")()(ToolCall("lookup", instruction))
    assert out.ok and words <= set(out.text.split())


@needs_words
def test_lookup_says_when_no_word_fits():
    assert TOOLS.get("lookup")()(ToolCall("lookup", '"qzxv"')).text == "no English word"


def test_lookup_without_a_word_list_says_how_to_install_it(tmp_path):
    with pytest.raises(WordListMissing, match="apt-get install wamerican"):
        TOOLS.get("lookup")({"words": str(tmp_path / "none")})
    assert letters_of('letters "Ogd" please') == "ogd"


needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=str(sandbox_problem()))


@needs_sandbox
def test_code_execute_runs_the_referenced_code_in_the_sandbox():
    steps = (Step(1, "code generate", "x", "ans = 46 + 27\nprint(ans)"),
             Step(2, "code generate", "y", "```python\nans = 2 ** 10\nprint(ans)\n```"))
    run = TOOLS.get("code_execute")()
    assert run(ToolCall("code execute", "Execute the code in #1.", steps=steps)).text == "73"
    assert run(ToolCall("code execute", "Execute it.", steps=steps)).text == "1024"   # the latest


@needs_sandbox
def test_code_execute_reports_failures_and_timeouts():
    run = TOOLS.get("code_execute")({"wall_s": 2, "cpu_s": 1})
    bad = run(ToolCall("code execute", "#1", steps=(Step(1, "code generate", "", "1/0"),)))
    assert not bad.ok and "ZeroDivisionError" in bad.text
    loop = run(ToolCall("code execute", "#1", steps=(Step(1, "code generate", "", "while True: pass"),)))
    assert not loop.ok and loop.meta["timed_out"] and loop.error in ("cpu_time", "wall_time")
    none = run(ToolCall("code execute", "run", steps=()))
    assert not none.ok and none.error == "no code found"


def test_code_generate_asks_the_llm_and_keeps_the_code(tmp_path):
    from fake_backend import engine_requests, scripted_llm
    llm, engines = scripted_llm(tmp_path, {"script": ["Here:\n```python\nans = 6 * 7\nprint(ans)\n```\nDone."]})
    gen = TOOLS.get("code_generate")({"max_tokens": 64}, llm=llm)
    outs = gen.run_batch([ToolCall("code generate", "Multiply 6 by 7.", input="What is 6 times 7?"),
                          ToolCall("code generate", "Again.", input="What is 6 times 7?")])
    assert [o.text for o in outs] == ["ans = 6 * 7\nprint(ans)"] * 2
    (req, req2) = engine_requests(engines)  # one batch, two requests
    assert "Multiply 6 by 7." in req.messages[0].content and "What is 6 times 7?" in req.messages[0].content
    assert len(engines[0].requests_seen) == 2 and engines[0].calls == 1


def test_code_execute_refuses_to_start_without_the_sandbox(monkeypatch):
    from retrace.tools import code
    from retrace.tools.code_exec import SandboxUnavailable
    monkeypatch.setattr(code, "sandbox_problem", lambda *a, **k: "bwrap not found; install it")
    with pytest.raises(SandboxUnavailable, match="bwrap not found"):
        TOOLS.get("code_execute")()


def test_web_search_is_used_when_endpoint_and_key_are_set(monkeypatch):
    import io

    from retrace.tools import search
    seen = {}

    def fake_urlopen(req, timeout):
        seen["url"], seen["auth"] = req.full_url, req.headers.get("Authorization")
        return io.BytesIO(json.dumps({"results": [{"url": "https://x", "snippet": "Morse, 1837."}]}).encode())
    monkeypatch.setattr(search.urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setenv("RETRACE_SEARCH_ENDPOINT", "https://search.example/api")
    monkeypatch.setenv("RETRACE_SEARCH_KEY", "k")
    out = TOOLS.get("search")()(ToolCall("search", "telegram inventor"))
    assert out.text == "Morse, 1837." and out.meta["backend"] == "web"
    assert out.meta["collection"] == "https://search.example/api" and out.meta["hits"][0]["id"] == "https://x"
    assert seen["url"].endswith("?q=telegram+inventor") and seen["auth"] == "Bearer k"
