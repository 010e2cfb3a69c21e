"""`search`: find a passage that answers a query (ART's search tool, §3.3).

    tool = TOOLS.get("search")({"collection": "path/to/passages.jsonl", "top_k": 1})
    out = tool(ToolCall("search", "When was the telegram invented?"))
    out.text        # the best passage
    out.meta        # {"backend": "bm25", "collection": "retrace-passages-v1", "stand_in": True,
                    #  "version": "<sha256[:12] of the file>", "hits": [{"id", "score"}, …],
                    #  "found": True}

Two implementations behind one interface:
- offline (default): BM25 (the `bm25s` package) over a local JSONL collection of
  `{"id", "title", "text"}` rows; retrace ships `collections/retrace-passages-v1.jsonl`,
  48 passages written for the embedded smoke. It is a STAND-IN, not the web search of the
  paper (most real questions find nothing in it): `describe()` says `stand_in: true`, and
  the ART report shows it beside each task's hit rate and notes it on the claims.
- web: when `endpoint` and `key` are configured (settings, or RETRACE_SEARCH_ENDPOINT and
  RETRACE_SEARCH_KEY), a GET `endpoint?q=<query>` with header `Authorization: Bearer <key>`
  returning JSON `{"results": [{"title", "snippet", "url"}, …]}`. Web results change over
  time, so such runs are not repeatable; every hit records the endpoint and the time.
Every hit records the collection and version that produced it.
"""

from __future__ import annotations

import functools
import json
import os
import time
import urllib.parse
import urllib.request
from pathlib import Path

from retrace.hashing import sha256_file
from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolCall, ToolOutput

DEFAULT_COLLECTION = Path(__file__).resolve().parent / "collections" / "retrace-passages-v1.jsonl"


@functools.lru_cache(maxsize=4)
def _bm25_index(path: str, digest: str):
    import bm25s  # deferred: registry discovery should not pay for it

    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    rows.append((str(row["id"]), f"{row.get('title', '')}. {row['text']}", row["text"]))
                except (ValueError, KeyError) as e:
                    raise ValueError(f"{path}:{lineno}: a passage needs 'id' and 'text' ({e})") from None
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([r[1] for r in rows], stopwords="en", show_progress=False), show_progress=False
    )
    return rows, retriever


def bm25_search(path: Path, query: str, top_k: int = 1, digest: str | None = None) -> list[dict]:
    """Top passages for `query` as [{"id", "text", "score"}], best first (score > 0 only)."""
    import bm25s

    rows, retriever = _bm25_index(str(path), digest or sha256_file(path))
    tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
    if not tokens.ids or not tokens.ids[0]:
        return []
    k = min(top_k, len(rows))
    docs, scores = retriever.retrieve(tokens, k=k, show_progress=False)
    return [
        {"id": rows[int(d)][0], "text": rows[int(d)][2], "score": round(float(s), 4)}
        for d, s in zip(docs[0], scores[0])
        if float(s) > 0
    ]


@TOOLS.register("search")
class Search(Tool):
    name = "search"

    def __init__(self, settings: dict | None = None, llm=None):
        super().__init__(settings, llm)
        self.endpoint = self.settings.get("endpoint") or os.environ.get("RETRACE_SEARCH_ENDPOINT")
        self.key = self.settings.get("key") or os.environ.get("RETRACE_SEARCH_KEY")
        self.path = Path(self.settings.get("collection") or DEFAULT_COLLECTION)
        if not (self.endpoint and self.key) and not self.path.is_file():
            raise FileNotFoundError(
                f"search collection {self.path} not found (setting tools.search.collection)"
            )
        self.top_k = int(self.settings.get("top_k", 1))
        self.digest = None if (self.endpoint and self.key) else sha256_file(self.path)

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        return [Path((settings or {}).get("collection") or DEFAULT_COLLECTION)]

    def describe(self) -> dict:
        """Backend, corpus and its fingerprint; `stand_in` marks the shipped toy collection
        (the report and the claims that rest on search say so)."""
        if self.endpoint and self.key:
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
            hits = (
                self._web(call.instruction)
                if meta["backend"] == "web"
                else bm25_search(self.path, call.instruction, self.top_k, self.digest)
            )
        except OSError as e:  # the web backend's network errors
            return ToolOutput(
                "No result.", ok=False, error=f"search failed: {e}", meta={**meta, "found": False}
            )
        meta["hits"] = [{k: h[k] for k in h if k != "text"} for h in hits]
        meta["found"] = bool(hits)  # per call: the report's hit rate per task
        if not hits:
            return ToolOutput("No result.", ok=False, error="no passage matched", meta=meta)
        return ToolOutput(" ".join(h["text"] for h in hits), meta=meta)

    def _web(self, query: str) -> list[dict]:
        url = f"{self.endpoint}?{urllib.parse.urlencode({'q': query})}"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(req, timeout=float(self.settings.get("timeout_s", 10))) as r:
            results = json.loads(r.read().decode("utf-8")).get("results") or []
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return [
            {"id": x.get("url", ""), "text": x.get("snippet", ""), "score": None, "retrieved": at}
            for x in results[: self.top_k]
        ]
