"""Web search for the `search` tool: a SerpAPI-compatible HTTP API, responses cached like requests.

    hits = serpapi("telegram inventor", {"engine": "google", "timeout_s": 10}, key=os.environ["SERPAPI_API_KEY"],
                   top_k=1, cache_dir="results/cache/search")
    # [{"id": url, "title": ..., "text": snippet, "score": None, "retrieved": "2026-…Z", "cached": False}]

The API: GET `<endpoint>?engine=<engine>&q=<query>&num=<top_k>&api_key=<key>` returning JSON
whose `answer_box` (if any) and `organic_results` [{"title", "link", "snippet"}] are the hits
(SerpAPI's documented response; compatible services answer the same way). The key comes from
the environment only, never from a config file, and is never stored or hashed.

Web results change over time, so each response is cached, keyed by sha256 of the endpoint and
the parameters without the key, as one immutable file `<cache_dir>/<key[:2]>/<key>.json`
published once (retrace.util.atomic.publish_once: the first writer wins): a rerun reads the same
results the first run saw, and each hit records when it was retrieved and whether it came
from the cache. Delete the cache folder to search afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.parse
import urllib.request
from pathlib import Path

from retrace.util.atomic import publish_once

DEFAULT_ENDPOINT = "https://serpapi.com/search.json"


def serpapi(query: str, settings: dict, key: str, top_k: int, cache_dir: str | Path) -> list[dict]:
    """The top `top_k` hits for `query`, from the cache or the API (OSError when unreachable);
    `settings` states `engine` and `timeout_s` (the search tool fills them from its DEFAULTS)."""
    endpoint = settings.get("endpoint") or DEFAULT_ENDPOINT
    params = {"engine": settings["engine"], "q": query, "num": str(top_k)}
    entry = cached_get(endpoint, params, key, Path(cache_dir), float(settings["timeout_s"]))
    body, hits = entry["response"], []
    box = body.get("answer_box") or {}
    if box.get("answer") or box.get("snippet"):
        hits.append(
            {
                "id": box.get("link", "answer_box"),
                "title": box.get("title", ""),
                "text": box.get("answer") or box["snippet"],
            }
        )
    for r in body.get("organic_results") or []:
        if r.get("snippet"):
            hits.append({"id": r.get("link", ""), "title": r.get("title", ""), "text": r["snippet"]})
    return [
        {**h, "score": None, "retrieved": entry["retrieved"], "cached": entry["cached"]} for h in hits[:top_k]
    ]


def cached_get(endpoint: str, params: dict, key: str, cache_dir: Path, timeout: float) -> dict:
    """{"response", "retrieved", "cached"}: the cached response to (endpoint, params), else a
    GET with `api_key` added, published to the cache."""
    digest = hashlib.sha256(json.dumps([endpoint, params], sort_keys=True).encode()).hexdigest()
    path = cache_dir / digest[:2] / f"{digest}.json"
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("key") == digest:  # a file copied under another name is not this response
            return {**entry, "cached": True}
    except (OSError, ValueError):
        pass
    url = f"{endpoint}?{urllib.parse.urlencode({**params, 'api_key': key})}"
    with urllib.request.urlopen(urllib.request.Request(url), timeout=timeout) as r:
        response = json.loads(r.read().decode("utf-8"))
    entry = {
        "key": digest,
        "request": {"endpoint": endpoint, "params": params},
        "response": response,
        "retrieved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    publish_once(path, json.dumps(entry), path.parent / f".tmp-{os.getpid()}-{path.name}")
    return {**entry, "cached": False}
