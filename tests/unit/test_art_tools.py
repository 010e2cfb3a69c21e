"""ART's tools: BM25 search over the shipped collection, dictionary lookup, code tools."""

import gzip
import json

import pytest

from retrace.art.program import Step
from retrace.tools import TOOLS, lookup
from retrace.tools._interface import ToolCall, tool_name
from retrace.tools.code_exec import run_code, sandbox_problem
from retrace.tools.lookup import DEFAULT_WORDS, PACKAGED, WordListMissing, letters_of
from retrace.tools.search import DEFAULT_COLLECTION, bm25_search


def test_tools_are_registered_plugins():
    assert {"search", "lookup", "code_generate", "code_execute"} <= set(TOOLS.names())
    assert tool_name("code execute") == "code_execute" and TOOLS.get("code_execute").executor is run_code


@pytest.mark.parametrize(
    "query, best",
    [
        ("When was the telegram invented?", "telegram"),
        ("Which deity is the destroyer in the Trimurti?", "trimurti"),
        ("force on a charge in an electric field", "electric-force"),
        ("momentum of a plane mass velocity", "momentum"),
    ],
)
def test_bm25_ranks_the_right_passage_first(query, best):
    hits = bm25_search(DEFAULT_COLLECTION, query, top_k=3)
    assert hits[0]["id"] == best
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_every_hit_records_collection_and_version():
    out = TOOLS.get("search")({"top_k": 2})(ToolCall("search", "When did Abraham Lincoln live?"))
    assert out.ok and "1809-1865" in out.text
    assert out.meta["collection"] == "retrace-passages-v1" and len(out.meta["version"]) == 12
    assert out.meta["hits"][0]["id"] == "lincoln" and out.meta["backend"] == "bm25"
    assert out.meta["found"] and out.meta["stand_in"]  # the shipped collection is labelled a stand-in


def test_search_with_no_match_says_so(tmp_path):
    coll = tmp_path / "c.jsonl"
    coll.write_text(json.dumps({"id": "a", "title": "Cats", "text": "Cats purr."}) + "\n")
    out = TOOLS.get("search")({"collection": str(coll)})(ToolCall("search", "quantum chromodynamics"))
    assert not out.ok and out.text == "No result." and out.meta["hits"] == []
    assert out.meta["found"] is False and out.meta["stand_in"] is False  # the user's own corpus


@pytest.mark.parametrize(
    "instruction, words",
    [
        ('Which English words use exactly the letters "tac"?', {"act", "cat"}),
        ("The word hte is a scrambled version of the English word hte", {"the"}),
        ('Which English words use exactly the letters "oaltytl"?', {"totally"}),
    ],
)
def test_lookup_unscrambles_words(instruction, words):
    out = TOOLS.get("lookup")()(ToolCall("lookup", instruction))
    assert out.ok and words <= set(out.text.split())


def test_lookup_says_when_no_word_fits():
    assert TOOLS.get("lookup")()(ToolCall("lookup", '"qzxv"')).text == "no English word"


def test_the_default_word_list_comes_from_pypi_not_apt(monkeypatch):
    tool = TOOLS.get("lookup")()
    assert DEFAULT_WORDS == "pyspellchecker:en" and tool.path.name == "en.json.gz"
    assert tool.describe()["version"] == PACKAGED[DEFAULT_WORDS][2][:12]
    # most frequent first: the likely answer leads
    assert tool(ToolCall("lookup", '"ogd"')).text.split()[0] == "dog"
    assert tool(ToolCall("lookup", '"enilst"')).text.split()[:2] == ["listen", "silent"]


def test_a_word_list_that_is_not_the_pinned_file_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "spellchecker" / "resources"
    fake.mkdir(parents=True)
    (fake / "en.json.gz").write_bytes(gzip.compress(b'{"cat": 1}'))
    monkeypatch.setattr(lookup, "word_list_path", lambda words: fake / "en.json.gz")
    with pytest.raises(WordListMissing, match="not the pinned"):
        TOOLS.get("lookup")()


def test_lookup_reads_a_plain_word_file_too(tmp_path):
    words = tmp_path / "words"
    words.write_text("cat\nAct\ndog\n")
    tool = TOOLS.get("lookup")({"words": str(words)})
    assert tool(ToolCall("lookup", '"tac"')).text == "act cat"
    assert tool.describe()["collection"] == str(words)


def test_lookup_without_a_word_list_says_what_is_missing(tmp_path):
    with pytest.raises(WordListMissing, match="none"):
        TOOLS.get("lookup")({"words": str(tmp_path / "none")})
    assert letters_of('letters "Ogd" please') == "ogd"


needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=f"[SANDBOX] {sandbox_problem()}")


@needs_sandbox
def test_code_execute_runs_the_referenced_code_in_the_sandbox():
    steps = (
        Step(1, "code generate", "x", "ans = 46 + 27\nprint(ans)"),
        Step(2, "code generate", "y", "```python\nans = 2 ** 10\nprint(ans)\n```"),
    )
    run = TOOLS.get("code_execute")()
    assert run(ToolCall("code execute", "Execute the code in #1.", steps=steps)).text == "73"
    assert run(ToolCall("code execute", "Execute it.", steps=steps)).text == "1024"  # the latest


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

    llm, engines = scripted_llm(
        tmp_path, {"script": ["Here:\n```python\nans = 6 * 7\nprint(ans)\n```\nDone."]}
    )
    gen = TOOLS.get("code_generate")({"max_tokens": 64}, llm=llm)
    outs = gen.run_batch(
        [
            ToolCall("code generate", "Multiply 6 by 7.", input="What is 6 times 7?"),
            ToolCall("code generate", "Again.", input="What is 6 times 7?"),
        ]
    )
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


def test_a_tsv_wikipedia_style_corpus_is_indexed_once_and_kept(tmp_path):
    from retrace.tools import search

    corpus = tmp_path / "psgs.tsv"  # DPR's psgs_w100.tsv layout: id, text, title
    corpus.write_text(
        "id\ttext\ttitle\n1\tSamuel Morse sent the first telegram in 1844.\tTelegraphy\n"
        "2\tThe Nile is the longest river in Africa.\tNile\n"
    )
    index = tmp_path / "index"
    tool = TOOLS.get("search")({"collection": str(corpus), "index_dir": str(index)})
    out = tool(ToolCall("search", "Who sent the first telegram?"))
    assert out.ok and out.text.startswith("Samuel Morse") and out.meta["hits"][0]["id"] == "1"
    assert out.meta["collection"] == "psgs" and not out.meta["stand_in"]
    (kept,) = index.iterdir()  # built once, named by the corpus and its digest
    assert kept.name == f"psgs-{search.sha256_file(corpus)[:16]}"
    search._bm25_index.cache_clear()  # another job: loads the kept index instead of rebuilding
    again = TOOLS.get("search")({"collection": str(corpus), "index_dir": str(index)})
    assert again(ToolCall("search", "longest river in Africa")).meta["hits"][0]["id"] == "2"
    assert TOOLS.get("search").data_files({"collection": str(corpus)}) == [corpus]


def test_serpapi_backend_caches_responses_and_keeps_the_key_out(monkeypatch, tmp_path):
    import io

    from retrace.tools import _search_web

    calls = []

    def fake_urlopen(req, timeout):
        calls.append(req.full_url)
        body = {"organic_results": [{"title": "Telegraph", "link": "https://x", "snippet": "Morse, 1837."}]}
        return io.BytesIO(json.dumps(body).encode())

    monkeypatch.setattr(_search_web.urllib.request, "urlopen", fake_urlopen)
    settings = {"backend": "serpapi", "cache_dir": str(tmp_path / "cache")}
    monkeypatch.delenv("SERPAPI_API_KEY", raising=False)
    with pytest.raises(ValueError, match=r"set the API key in \$SERPAPI_API_KEY"):
        TOOLS.get("search")(settings)
    monkeypatch.setenv("SERPAPI_API_KEY", "secret-key")
    out = TOOLS.get("search")(settings)(ToolCall("search", "telegram inventor"))
    assert out.ok and out.text == "Morse, 1837." and out.meta["found"] and out.meta["backend"] == "serpapi"
    assert "engine=google" in calls[0] and "api_key=secret-key" in calls[0]
    again = TOOLS.get("search")(settings)(ToolCall("search", "telegram inventor"))
    assert len(calls) == 1 and again.meta["hits"][0]["cached"]  # the rerun reads the cache
    (entry,) = (tmp_path / "cache").rglob("*.json")
    assert "secret-key" not in entry.read_text()
    assert TOOLS.get("search").data_files(settings) == []


def _fake_execute(monkeypatch, stdout="", ans=None, ok=True, stderr=""):
    from retrace.tools import code
    from retrace.tools.code_exec import ExecResult

    monkeypatch.setattr(code, "sandbox_problem", lambda *a, **k: None)
    result = ExecResult(
        ok=ok,
        ans=ans,
        stdout=stdout,
        stderr=stderr,
        exit_code=0 if ok else 1,
        signal=None,
        timed_out=False,
        killed_reason=None,
        truncated=False,
        wall_s=0.01,
    )
    monkeypatch.setattr(code.CodeExecute, "executor", staticmethod(lambda src, limits, **options: result))


def test_code_execute_output_keeps_head_and_tail_under_a_configured_cap(monkeypatch):
    words = [f"word{i:03d}" for i in range(200)]  # 1599 characters
    _fake_execute(monkeypatch, ans="\n".join(words))
    steps = (Step(1, "code generate", "x", "print('hi')"),)
    out = TOOLS.get("code_execute")({"output_chars": 200})(ToolCall("code execute", "#1", steps=steps))
    assert out.ok and out.text.startswith("word000\nword001") and out.text.endswith("word198\nword199")
    assert "[…1399 characters cut…]" in out.text
    assert (
        out.meta["output_chars"] == 1599 and out.meta["output_cap"] == 200 and out.meta["output_cut"] == 1399
    )
    full = TOOLS.get("code_execute")({"output_chars": 5000})(ToolCall("code execute", "#1", steps=steps))
    assert full.text == "\n".join(words) and full.meta["output_cut"] == 0  # lines kept, nothing lost


def test_code_execute_errors_are_capped_the_same_way(monkeypatch):
    _fake_execute(monkeypatch, ok=False, stderr="ValueError: " + "x" * 600)
    steps = (Step(1, "code generate", "x", "raise ValueError"),)
    out = TOOLS.get("code_execute")({"output_chars": 100})(ToolCall("code execute", "#1", steps=steps))
    assert not out.ok and out.text.startswith("Error: ValueError") and out.text.endswith("x" * 50)
    assert out.meta["output_cut"] == len("Error: ValueError: ") + 600 - 100
