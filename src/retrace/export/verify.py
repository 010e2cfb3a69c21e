"""`retrace audit --crate run.crate.zip`: verify a published crate without the results directory.

Checks, in order (each finding names the file, entity or row):
1. the zip opens and every member's CRC holds; no member leaves the crate;
2. `manifest-sha256.txt` is well formed (`<64 lowercase hex>  <path>` per line), lists every
   other file exactly once, and every hash matches. ro-crate-metadata.json is listed there,
   so a changed byte in the metadata breaks its hash; a changed byte in the manifest breaks
   its format, a hash or a path;
3. every File entity of the metadata that is in the crate has the sha256 of its bytes, and
   every file in the crate is described;
4. every CreateAction of a job is named by the sha256 of its provenance record, that record is
   in the crate with those bytes, and its artifact, by-products and inputs carry the checksums
   the metadata gives them (lineage: each input's record is in the crate with the recorded hash);
5. every tool that lists its source files hashes to its recorded sources hash;
6. results.csv and claims.csv: each row's record hash / evidence resolves to an action in the
   crate (and, as `retrace audit` does, to a record in the claims file's lineage).
What it does not cover: artifacts referenced but not included (generations without
`--include-generations`, the request cache, model weights) are checked only against the
hashes recorded in the crate, not against their bytes; a crate rebuilt wholesale by someone
who rewrote every record and hash is self-consistent (sign or deposit the zip to pin it).
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from retrace.export.crate import MANIFEST, METADATA
from retrace.util.hashing import hash_sources, sha256_file

_LINE = re.compile(r"([0-9a-f]{64})  (\S(?:.*\S)?)")


def verify(crate: str | Path) -> list[str]:
    """Every problem found in the crate (a .zip or an unpacked directory); [] when it holds."""
    crate = Path(crate)
    if crate.is_dir():
        return _verify_dir(crate)
    with tempfile.TemporaryDirectory() as tmp:
        problems = _unpack(crate, Path(tmp))
        return problems or _verify_dir(Path(tmp))


def _unpack(crate: Path, dest: Path) -> list[str]:
    if not crate.is_file():
        return [f"{crate}: no such crate"]
    try:
        with zipfile.ZipFile(crate) as z:
            bad = [
                n for n in z.namelist() if PurePosixPath(n).is_absolute() or ".." in PurePosixPath(n).parts
            ]
            if bad:
                return [f"{crate}: member {n} points outside the crate" for n in bad]
            corrupt = z.testzip()
            if corrupt:
                return [f"{crate}: member {corrupt} is corrupt (CRC mismatch)"]
            z.extractall(dest)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        return [f"{crate}: not a readable zip ({e})"]
    return []


def _verify_dir(root: Path) -> list[str]:
    problems = _check_manifest(root)
    try:
        meta = json.loads((root / METADATA).read_text())
        graph = _graph(meta)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return problems + [f"{METADATA}: unreadable ({e})"]
    for check in (_check_files, _check_actions, _check_code, _check_tables):
        try:
            problems += check(root, graph)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            # damaged content (a changed record or table) is a finding, not a crash
            problems.append(
                f"{check.__name__.removeprefix('_check_')}: damaged content ({type(e).__name__}: {e})"
            )
    return problems


def _local(id_: str) -> str:
    """A data entity's @id as the path inside the crate: ids are URI paths, percent-encoded
    (RO-Crate 1.1, "Core Metadata for Data Entities"), so `art@feedback` is `art%40feedback`."""
    return id_ if id_.startswith("#") or "://" in id_ else unquote(id_)


def _graph(meta: dict) -> dict[str, dict]:
    """Entities by id, data entities by their path in the crate (see _local)."""
    graph: dict[str, dict] = {}
    for e in meta["@graph"]:
        key = _local(e["@id"])
        if key in graph:
            raise ValueError(f"entity {e['@id']} appears twice")
        graph[key] = e
    return graph


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _check_manifest(root: Path) -> list[str]:
    path = root / MANIFEST
    if not path.is_file():
        return [f"{MANIFEST}: missing"]
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return [f"{MANIFEST}: not UTF-8 text"]
    problems, listed = [], {}
    if not text.endswith("\n"):
        problems.append(f"{MANIFEST}: does not end with a newline")
    for lineno, line in enumerate(text.split("\n")[:-1], 1):
        m = _LINE.fullmatch(line)
        if not m:
            problems.append(f"{MANIFEST}:{lineno}: malformed line {line[:80]!r}")
        elif m.group(2) in listed:
            problems.append(f"{MANIFEST}:{lineno}: {m.group(2)} listed twice")
        else:
            listed[m.group(2)] = m.group(1)
    on_disk = _files(root) - {MANIFEST}
    problems += [f"{MANIFEST}: lists {n}, which is not in the crate" for n in sorted(set(listed) - on_disk)]
    problems += [f"{n}: in the crate but not in {MANIFEST}" for n in sorted(on_disk - set(listed))]
    problems += [
        f"{n}: sha256 differs from {MANIFEST}"
        for n in sorted(on_disk & set(listed))
        if sha256_file(root / n) != listed[n]
    ]
    return problems


def _types(e: dict) -> list[str]:
    t = e.get("@type", [])
    return t if isinstance(t, list) else [t]


def _ids(value) -> list[str]:
    values = value if isinstance(value, list) else [] if value is None else [value]
    return [_local(v["@id"]) for v in values if isinstance(v, dict) and "@id" in v]


def _check_files(root: Path, graph: dict) -> list[str]:
    problems, described = [], set()
    for id_, e in graph.items():
        if "File" not in _types(e) or id_.startswith("#") or "://" in id_:
            continue
        described.add(id_)
        if not (root / id_).is_file():
            problems.append(f"{id_}: described in {METADATA} but not in the crate")
        elif id_ != MANIFEST and e.get("sha256") != sha256_file(root / id_):
            problems.append(f"{id_}: sha256 differs from {METADATA}")
    missing = _files(root) - described - {METADATA, MANIFEST}
    return problems + [f"{n}: in the crate but not described in {METADATA}" for n in sorted(missing)]


def _check_actions(root: Path, graph: dict) -> list[str]:
    problems = []
    records = {i for i in graph if i.endswith(".prov.json")}
    for id_, e in sorted(graph.items()):
        if not id_.startswith("#action/"):
            continue
        rec_id = (_ids(e.get("subjectOf")) or [""])[0]
        records.discard(rec_id)
        problems += _check_action(root, graph, id_, e, rec_id)
    return problems + [f"{r}: a provenance record that no action names" for r in sorted(records)]


def _check_action(root: Path, graph: dict, id_: str, action: dict, rec_id: str) -> list[str]:
    where = f"{id_[:20]}… ({action.get('name')})"
    if not (root / rec_id).is_file():
        return [f"{where}: its provenance record {rec_id or '(none)'} is not in the crate"]
    if sha256_file(root / rec_id) != id_.split("/", 1)[1]:
        return [f"{where}: record {rec_id} does not have the sha256 the action is named by"]
    rec = json.loads((root / rec_id).read_text())
    sums = {graph.get(i, {}).get("sha256") for i in _ids(action.get("result"))}
    problems = [
        f"{where}: result {o['path']} has no entity with sha256 {o['sha256'][:12]}…"
        for o in [rec["artifact"], *rec.get("companions", [])]
        if o["sha256"] not in sums
    ]
    sums = {graph.get(i, {}).get("sha256") for i in _ids(action.get("object"))}
    for inp in rec.get("inputs", []):
        if inp["sha256"] not in sums:
            problems.append(f"{where}: input {inp['path']} has no entity with sha256 {inp['sha256'][:12]}…")
        if "prov" in inp:
            problems += _check_link(root, where, inp)
    return problems


def _check_link(root: Path, where: str, inp: dict) -> list[str]:
    """A lineage link: the input's record is in the crate, unchanged, and names that artifact."""
    pp = root / inp["prov"]
    if not pp.is_file():
        return [f"{where}: lineage broken, record {inp['prov']} of input {inp['path']} is not in the crate"]
    if sha256_file(pp) != inp["prov_sha256"]:
        return [f"{where}: lineage broken, record {inp['prov']} differs from the hash its consumer recorded"]
    if json.loads(pp.read_text())["artifact"]["sha256"] != inp["sha256"]:
        return [f"{where}: lineage broken, {inp['prov']} describes other bytes than the input used"]
    return []


def _check_code(root: Path, graph: dict) -> list[str]:
    problems = []
    for id_, e in sorted(graph.items()):
        parts = _ids(e.get("hasPart")) if id_.startswith("#tool/") else []
        missing = [p for p in parts if not (root / p).is_file()]
        if missing:  # e.g. a part's name altered in the metadata: a finding, not a crash
            problems.append(f"{id_}: source file {missing[0]} is not in the crate")
        elif parts and hash_sources([root / p for p in parts]) != e.get("identifier"):
            problems.append(f"{id_}: its source files do not hash to its recorded sources hash")
    return problems


def _check_tables(root: Path, graph: dict) -> list[str]:
    from retrace.store.provenance import audit_results_table

    problems = []
    tables = [i for i in _ids(graph.get("#run", {}).get("result")) if i.endswith(".csv")]
    if not tables:
        problems.append("#run: no workflow run action with results.csv / claims.csv as results")
    for table in tables:
        if not (root / table).is_file():
            continue  # reported by _check_files
        with contextlib.chdir(root):  # records name their inputs relative to the run's root
            problems += audit_results_table(table)
        problems += [
            f"{table}: row evidence {h[:12]}… is not an action in the crate"
            for h in _row_hashes(root / table)
            if f"#action/{h}" not in graph
        ]
    return problems


def _row_hashes(path: Path) -> list[str]:
    import csv

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for row in rows:
        out += [h for h in (row.get("evidence") or "").split(";") if h]
        out += [row["prov_sha256"]] if row.get("prov_sha256") else []
    return out
