"""Provenance pages: the HTML form of `retrace audit`, one page per provenance record.

    nodes = collect([score, claims_csv, ...])   # {record sha256: node}, walking the inputs up
    pages = write_pages(nodes, out_dir)         # out_dir/prov/<sha256[:16]>.html

A node is one artifact with its `.prov.json`; its page shows the record (stage, config
slice, inputs with their hashes, code commit, packages, model and data fingerprints,
timings, host) and links each input that has a record to that input's page (up the
lineage), and each artifact that read this one (down). Every number in index.html links
to the page of the record it came from, keyed, as everywhere in the report, by the sha256
of the record's bytes. Records are read, never rewritten; a missing or unreadable ancestor
is shown as such rather than failing the report (`retrace audit` is where that fails).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from retrace.store.provenance import prov_path
from retrace.util.atomic import atomic_open
from retrace.util.hashing import sha256_file

PAGE_DIR = "prov"
SHOWN = ("artifact", "stage", "config", "config_hash", "inputs", "code", "packages", "host", "timing")


def page_name(record_sha: str) -> str:
    """The page of a record, relative to index.html."""
    return f"{PAGE_DIR}/{record_sha[:16]}.html"


def collect(artifacts: Iterable[Path]) -> dict[str, dict]:
    """Every record reachable from `artifacts` through their inputs, by record sha256."""
    nodes: dict[str, dict] = {}
    seen: set[str] = set()
    todo = [Path(a) for a in artifacts]
    while todo:
        path = todo.pop()
        record = prov_path(path)
        if str(record) in seen or not record.exists():
            continue
        seen.add(str(record))
        sha = sha256_file(record)
        try:
            rec = json.loads(record.read_text())
        except ValueError as e:  # shown on the page; `retrace audit` is where it fails
            rec = {"unreadable": str(e)}
        nodes[sha] = {"sha": sha, "path": str(path), "record": str(record), "rec": rec, "used_by": []}
        todo += [Path(i["path"]) for i in rec.get("inputs", []) if "prov" in i]
    _link_down(nodes)
    return nodes


def _link_down(nodes: dict[str, dict]) -> None:
    """Each node's "used_by": the nodes whose records list it as an input."""
    for node in nodes.values():
        for inp in node["rec"].get("inputs", []):
            parent = nodes.get(inp.get("prov_sha256", ""))
            if parent is not None:
                parent["used_by"].append(node["sha"])


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def page_context(node: dict, nodes: dict[str, dict]) -> dict:
    """What prov.html.j2 shows for one node: the record's parts, inputs with links."""
    rec = node["rec"]
    inputs = [
        {
            "path": i.get("path", ""),
            "sha256": i.get("sha256", ""),
            "page": (page_name(i["prov_sha256"]).split("/", 1)[1] if i.get("prov_sha256") in nodes else None),
            "has_record": "prov" in i,
        }
        for i in rec.get("inputs", [])
    ]
    extra = {k: v for k, v in rec.items() if k not in SHOWN}
    return {
        "node": node,
        "rec": rec,
        "inputs": inputs,
        "extra": extra,
        "used_by": [
            {"path": nodes[s]["path"], "page": page_name(s).split("/", 1)[1]} for s in node["used_by"]
        ],
        "config": _pretty(rec.get("config", {})),
        "packages": rec.get("packages", {}),
        "code": rec.get("code", {}),
        "timing": rec.get("timing", {}),
        "host": _pretty(rec.get("host", {})),
        "extra_json": {k: _pretty(v) for k, v in extra.items()},
    }


def write_pages(nodes: dict[str, dict], out_dir: Path, env) -> list[Path]:
    """One page per node under out_dir/prov/, rendered by `env` (html.environment())."""
    template = env.get_template("prov.html.j2")
    written = []
    for sha, node in sorted(nodes.items()):
        out = Path(out_dir) / page_name(sha)
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(out) as f:
            f.write(template.render(**page_context(node, nodes)))
        written.append(out)
    return written
