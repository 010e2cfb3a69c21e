"""`search`: find a passage that answers a query (ART's search tool, §3.3).

    tool = TOOLS.get("search")({"collection": "path/to/passages.jsonl", "top_k": 1})
    out = tool(ToolCall("search", "When was the telegram invented?"))
    out.text        # the best passage
    out.meta        # {"backend": "bm25", "collection": "retrace-passages-v1", "stand_in": True,
                    #  "version": "<sha256[:12] of the file>", "hits": [{"id", "score"}, …],
                    #  "found": True}
    TOOLS.get("search")({"collection": "psgs_w100.tsv", "index_dir": "results/cache/search"})
    TOOLS.get("search")({"backend": "serpapi"})      # key from $SERPAPI_API_KEY

Backends (`backend`; default bm25, or web when `endpoint` and `key` are set):
- bm25 (offline): BM25 (the `bm25s` package) over a local corpus file: JSONL rows
  `{"id", "title", "text"}`, or a TSV with an `id, text, title` header (DPR's Wikipedia
  passages, psgs_w100.tsv). With `index_dir`, the index is built once per corpus version and
  kept there (`<stem>-<sha16>/`, memory-mapped when loaded), so a large corpus is not
  re-indexed by every job. retrace ships `collections/retrace-passages-v1.jsonl`, 48
  passages written for the embedded smoke. It is a STAND-IN, not the web search of the paper
  (most real questions find nothing in it): `describe()` says `stand_in: true`, and the ART
  report shows it beside each task's hit rate and notes it on the claims.
- serpapi: a SerpAPI-compatible HTTP API (tools/_search_web.py; `endpoint`, `engine`,
  `key_env` naming the environment variable that holds the key, default SERPAPI_API_KEY;
  `cache_dir`, default results/cache/search): responses cached like requests, so a rerun
  sees what the first run saw.
- web: a GET `endpoint?q=<query>` with header `Authorization: Bearer <key>` (settings, or
  RETRACE_SEARCH_ENDPOINT and RETRACE_SEARCH_KEY) returning JSON `{"results": [{"title",
  "snippet", "url"}, …]}`; not cached, so such runs are not repeatable.
Every call records the backend, corpus and version that produced it, and whether it found a
passage (`found`, the report's hit rate). The corpus file is an input of the ART jobs and
hashed into their keys (`data_files`); a web backend's settings are in the keys.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolCall, ToolOutput
from retrace.util.hashing import sha256_file

DEFAULT_COLLECTION = Path(__file__).resolve().parent / "collections" / "retrace-passages-v1.jsonl"
BACKENDS = ("bm25", "serpapi", "web")
# The settings a job may leave out (its `tools: {search: ...}` block), in one place: read plainly
# below. `engine` and `cache_dir` are serpapi's, `timeout_s` the web backends'.
DEFAULTS = {
    "top_k": 1,
    "key_env": "SERPAPI_API_KEY",
    "cache_dir": "results/cache/search",
    "timeout_s": 10,
    "engine": "google",
}


def read_corpus(path: str | Path) -> list[dict]:
    """[{"id", "title", "text"}] of a JSONL corpus, or of a TSV with an id/text/title header."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        if str(path).endswith(".tsv"):
            csv.field_size_limit(sys.maxsize)
            for lineno, row in enumerate(csv.DictReader(f, delimiter="\t"), 2):
                if not row.get("id") or row.get("text") is None:
                    raise ValueError(f"{path}:{lineno}: a passage needs 'id' and 'text' columns")
                rows.append({"id": row["id"], "title": row.get("title") or "", "text": row["text"]})
            return rows
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    rows.append({"id": str(row["id"]), "title": row.get("title", ""), "text": row["text"]})
                except (ValueError, KeyError) as e:
                    raise ValueError(f"{path}:{lineno}: a passage needs 'id' and 'text' ({e})") from None
    return rows


@functools.lru_cache(maxsize=4)
def _bm25_index(path: str, digest: str, index_dir: str | None = None):
    """(retriever, corpus rows or None when the retriever holds its own memory-mapped corpus)."""
    import bm25s  # deferred: registry discovery should not pay for it

    folder = Path(index_dir) / f"{Path(path).stem}-{digest[:16]}" if index_dir else None
    if folder is not None and (folder / "params.index.json").is_file():
        return bm25s.BM25.load(str(folder), mmap=True, load_corpus=True, show_progress=False), None
    rows = read_corpus(path)
    retriever = bm25s.BM25()
    texts = [f"{r['title']}. {r['text']}" for r in rows]
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    docs = [{"id": r["id"], "text": r["text"]} for r in rows]
    if folder is None:
        return retriever, docs
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=folder.parent, prefix=folder.name, suffix=".tmp")
    retriever.save(tmp, corpus=docs, show_progress=False)
    try:
        os.rename(tmp, folder)  # whole or absent; a concurrent builder's identical copy may win
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return bm25s.BM25.load(str(folder), mmap=True, load_corpus=True, show_progress=False), None


def bm25_search(
    path: Path, query: str, top_k: int = 1, digest: str | None = None, index_dir: str | None = None
) -> list[dict]:
    """Top passages for `query` as [{"id", "text", "score"}], best first (score > 0 only)."""
    import bm25s

    retriever, docs = _bm25_index(str(path), digest or sha256_file(path), index_dir)
    tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
    n = len(docs) if docs is not None else len(retriever.corpus)
    if not tokens.ids or not tokens.ids[0] or not n:
        return []
    found, scores = retriever.retrieve(tokens, corpus=docs, k=min(top_k, n), show_progress=False)
    return [
        {"id": str(d["id"]), "text": d["text"], "score": round(float(s), 4)}
        for d, s in zip(found[0], scores[0], strict=True)
        if float(s) > 0
    ]


@TOOLS.register("search")
class Search(Tool):
    name = "search"

    def __init__(self, settings: dict | None = None, llm=None):
        super().__init__({**DEFAULTS, **(settings or {})}, llm)
        self.endpoint = self.settings.get("endpoint") or os.environ.get("RETRACE_SEARCH_ENDPOINT")
        self.key = self.settings.get("key") or os.environ.get("RETRACE_SEARCH_KEY")
        self.backend = backend_of(self.settings)
        self.path = Path(self.settings.get("collection") or DEFAULT_COLLECTION)
        self.top_k = int(self.settings["top_k"])
        self.digest = ""  # the collection's sha256 (bm25 only)
        if self.backend == "bm25":
            if not self.path.is_file():
                raise FileNotFoundError(
                    f"search collection {self.path} not found (setting tools.search.collection)"
                )
            self.digest = sha256_file(self.path)
        elif self.backend == "serpapi":
            env = self.settings["key_env"]
            self.key = os.environ.get(env)
            if not self.key:
                raise ValueError(f"search backend serpapi: set the API key in ${env} (tools.search.key_env)")

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        if backend_of(settings or {}) != "bm25":
            return []  # a live API has no file to hash; its settings are in the keys
        return [Path((settings or {}).get("collection") or DEFAULT_COLLECTION)]

    def describe(self) -> dict:
        """Backend, corpus and its fingerprint; `stand_in` marks the shipped toy collection
        (the report and the claims that rest on search say so)."""
        if self.backend == "serpapi":
            from retrace.tools._search_web import DEFAULT_ENDPOINT

            where = f"{self.settings.get('endpoint') or DEFAULT_ENDPOINT} ({self.settings['engine']})"
            return {"backend": "serpapi", "collection": where, "version": "live, cached", "stand_in": False}
        if self.backend == "web":
            return {"backend": "web", "collection": self.endpoint, "version": "live", "stand_in": False}
        stand_in = self.path.resolve() == DEFAULT_COLLECTION
        return {
            "backend": "bm25",
            "collection": self.path.stem,
            "version": self.digest[:12],
            "stand_in": stand_in,
        }

    def __call__(self, call: ToolCall) -> ToolOutput:
        meta = self.describe()
        try:
            hits = self._hits(call.instruction)
        except OSError as e:  # the web backends' network errors
            return ToolOutput(
                "No result.", ok=False, error=f"search failed: {e}", meta={**meta, "found": False}
            )
        meta["hits"] = [{k: h[k] for k in h if k != "text"} for h in hits]
        meta["found"] = bool(hits)  # per call: the report's hit rate per task
        if not hits:
            return ToolOutput("No result.", ok=False, error="no passage matched", meta=meta)
        return ToolOutput(" ".join(h["text"] for h in hits), meta=meta)

    def _hits(self, query: str) -> list[dict]:
        if self.backend == "serpapi":
            from retrace.tools._search_web import serpapi

            cache = self.settings["cache_dir"]
            return serpapi(query, self.settings, self.key or "", self.top_k, cache)  # set: __init__
        if self.backend == "web":
            return self._web(query)
        return bm25_search(self.path, query, self.top_k, self.digest, self.settings.get("index_dir"))

    def _web(self, query: str) -> list[dict]:
        url = f"{self.endpoint}?{urllib.parse.urlencode({'q': query})}"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(req, timeout=float(self.settings["timeout_s"])) as r:
            results = json.loads(r.read().decode("utf-8")).get("results") or []
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return [
            {"id": x.get("url", ""), "text": x.get("snippet", ""), "score": None, "retrieved": at}
            for x in results[: self.top_k]
        ]


def backend_of(settings: dict) -> str:
    """The backend a `search` setting block means (unknown names refused, naming the valid)."""
    endpoint = settings.get("endpoint") or os.environ.get("RETRACE_SEARCH_ENDPOINT")
    key = settings.get("key") or os.environ.get("RETRACE_SEARCH_KEY")
    backend = settings.get("backend") or ("web" if endpoint and key else "bm25")
    if backend not in BACKENDS:
        raise ValueError(f"tools.search.backend: unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    return backend
