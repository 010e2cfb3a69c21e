"""`retrace export` and `retrace audit --crate` on a small run built through the real
provenance code (the real data, claims and report stages; generation and scoring records
written with `Provenance` as the stages do, without a model)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from export_run import MODEL, build_run, exported

from retrace.cli import main
from retrace.export.crate import MANIFEST, METADATA, export
from retrace.export.verify import verify


@pytest.fixture(scope="module")
def crate(tmp_path_factory) -> Path:
    return exported(tmp_path_factory.mktemp("run"))


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def rezip(data: dict[str, bytes], path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for n, b in data.items():
            z.writestr(n, b)
    return path


def graph(data: dict[str, bytes]) -> dict[str, dict]:
    return {e["@id"]: e for e in json.loads(data[METADATA])["@graph"]}


def test_fresh_crate_verifies_in_an_empty_directory(crate, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no results directory here
    assert main(["audit", "--crate", str(crate)]) == 0
    assert "OK" in capsys.readouterr().out


def test_contents_copied_and_referenced(crate):
    data = members(crate)
    g = graph(data)
    assert (
        "results/report/claims.csv" in data and "results/scores/m/fake/smoke_math/refine/seed0.json" in data
    )
    assert "results/generations/m/fake/smoke_math/refine/seed0.jsonl.prov.json" in data  # records always
    assert "results/generations/m/fake/smoke_math/refine/seed0.jsonl" not in data  # generations by checksum
    ref = g["#ref/results/generations/m/fake/smoke_math/refine/seed0.jsonl"]
    assert len(ref["sha256"]) == 64
    weights = [e for i, e in g.items() if i.startswith("#ref/") and e["name"].endswith("weights.gguf")]
    assert len(weights) == 1 and not any(n.endswith(".gguf") for n in data)
    assert '"kind":"local"' in weights[0]["description"]  # referenced by checksum and source
    assert "src/retrace/tasks/bundled/smoke_math.jsonl" in data  # a source still byte-identical
    assert {"Snakefile", "config/config.yaml", "workflow/rules/report.smk"} <= set(data)
    art = "results/art/m/word_unscrambling/art@feedback/seed0.jsonl"
    assert f"{art}.prov.json" in data  # the file keeps its name,
    assert g[f"{art}.prov.json".replace("@", "%40")]["about"]  # its @id is percent-encoded


def test_one_action_per_record_with_parameters_times_and_fingerprints(crate):
    data = members(crate)
    g = graph(data)
    records = [n for n in data if n.endswith(".prov.json")]
    actions = {i: e for i, e in g.items() if i.startswith("#action/")}
    pages = [n for n in records if "/report/prov/" in n]  # the report's per-record pages
    assert len(actions) == len(records) == 11 + len(pages) and pages
    # data, model, 2 generate, 2 score, an ART run, claims, 3 report files, and one per page
    for n in records:
        action = actions[f"#action/{sha256_file_bytes(data[n])}"]
        assert (
            action["subjectOf"] == {"@id": n.replace("@", "%40")} and action["startTime"] <= action["endTime"]
        )
    gen = next(e for e in actions.values() if e["name"].startswith("generate: ") and "refine" in e["name"])
    objs = {o["@id"] for o in gen["object"]}
    assert any(o.startswith("#pv/generate/method.sampling.temperature/") for o in objs)
    assert f"#fingerprint/model/{MODEL['fingerprint']}" in objs
    assert "results/data/smoke_math.jsonl" in objs
    tool = g[gen["instrument"]["@id"]]
    assert "SoftwareApplication" in tool["@type"] and len(tool["identifier"]) == 64 and tool["hasPart"]


def sha256_file_bytes(b: bytes) -> str:
    import hashlib

    return hashlib.sha256(b).hexdigest()


@pytest.mark.parametrize(
    "name",
    [
        METADATA,
        MANIFEST,
        "results/report/claims.csv",
        "results/report/results.csv.prov.json",
        "Snakefile",
        "results/scores/m/fake/smoke_math/greedy/seed0.json",
    ],
)
@pytest.mark.parametrize("where", [0, -1, "middle"])
def test_any_flipped_byte_fails_the_audit(crate, tmp_path, name, where):
    data = members(crate)
    b = bytearray(data[name])
    i = len(b) // 2 if where == "middle" else where
    b[i] ^= 0x01
    data[name] = bytes(b)
    assert verify(rezip(data, tmp_path / "t.zip"))


def test_tampered_file_with_a_recomputed_manifest_is_caught_by_the_metadata(crate, tmp_path):
    data = members(crate)
    data["results/report/results.csv"] += b"x,y\n"
    data[MANIFEST] = _manifest(data)
    problems = verify(rezip(data, tmp_path / "t.zip"))
    assert any(
        "results/report/results.csv: sha256 differs from ro-crate-metadata.json" in p for p in problems
    )


def test_swapped_record_with_consistent_hashes_breaks_the_lineage(crate, tmp_path):
    """Rewrite a score record and fix every hash a forger could see: the record's consumer
    (claims) still names the old record's sha256, and the action id no longer matches."""
    data = members(crate)
    name = "results/scores/m/fake/smoke_math/refine/seed0.json.prov.json"
    rec = json.loads(data[name])
    rec["config"]["seed"] = 1
    data[name] = json.dumps(rec).encode()
    meta = json.loads(data[METADATA])
    for e in meta["@graph"]:
        if e["@id"] == name:
            e["sha256"] = sha256_file_bytes(data[name])
    data[METADATA] = json.dumps(meta).encode()
    data[MANIFEST] = _manifest(data)
    problems = verify(rezip(data, tmp_path / "t.zip"))
    assert any("does not have the sha256 the action is named by" in p for p in problems)
    assert any("lineage broken" in p for p in problems)


def test_claim_evidence_must_resolve_to_an_action(crate, tmp_path):
    data = members(crate)
    g = graph(data)
    evidence = [r for r in data["results/report/claims.csv"].decode().splitlines()[1:] if r]
    assert evidence, "the fixture must produce a claim row"
    victim = next(i for i in g if i.startswith("#action/") and "score: " in g[i]["name"])
    meta = json.loads(data[METADATA])
    meta["@graph"] = [e for e in meta["@graph"] if e["@id"] != victim]
    data[METADATA] = json.dumps(meta).encode()
    data[MANIFEST] = _manifest(data)
    problems = verify(rezip(data, tmp_path / "t.zip"))
    assert any("is not an action in the crate" in p for p in problems)
    assert any("a provenance record that no action names" in p for p in problems)


def test_unlisted_extra_file_and_missing_file_fail(crate, tmp_path):
    data = members(crate)
    data["extra.txt"] = b"smuggled\n"
    assert any("extra.txt" in p for p in verify(rezip(data, tmp_path / "a.zip")))
    data = members(crate)
    del data["results/report/claims.csv"]
    assert any("claims.csv" in p for p in verify(rezip(data, tmp_path / "b.zip")))


def test_not_a_zip_is_reported(tmp_path, capsys):
    bad = tmp_path / "x.zip"
    bad.write_bytes(b"not a zip")
    assert main(["audit", "--crate", str(bad)]) == 1
    assert "not a readable zip" in capsys.readouterr().out


def test_export_refuses_a_changed_artifact(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = build_run(tmp_path)
    (results / "report" / "results.csv").write_text("edited\n")
    with pytest.raises(ValueError, match="results/report/results.csv: bytes changed"):
        export(results, tmp_path / "c.zip")


def test_include_generations_copies_them(tmp_path):
    out = exported(tmp_path, include_generations=True)
    assert "results/generations/m/fake/smoke_math/refine/seed0.jsonl" in members(out)
    assert verify(out) == []


def _manifest(data: dict[str, bytes]) -> bytes:
    return "".join(
        f"{sha256_file_bytes(b)}  {n}\n" for n, b in sorted(data.items()) if n != MANIFEST
    ).encode()


def test_past_the_size_budget_the_largest_artifacts_are_referenced(tmp_path, monkeypatch):
    from retrace.export import collect

    monkeypatch.setattr(collect, "MAX_TOTAL_BYTES", 4000)
    out = exported(tmp_path)
    data = members(out)
    copied = [n for n in data if n.startswith("results/") and not n.endswith(".prov.json")]
    assert sum(len(data[n]) for n in copied) <= 4000
    assert "results/report/accuracy_vs_compute.png" not in data  # the largest goes first
    assert "#ref/results/report/accuracy_vs_compute.png" in graph(data)
    assert verify(out) == []


def test_crate_without_the_workflow_run_is_refused(crate, tmp_path):
    data = members(crate)
    meta = json.loads(data[METADATA])
    meta["@graph"] = [e for e in meta["@graph"] if e["@id"] != "#run"]
    data[METADATA] = json.dumps(meta).encode()
    data[MANIFEST] = _manifest(data)
    assert any(p.startswith("#run: no workflow run action") for p in verify(rezip(data, tmp_path / "t.zip")))


def test_audit_needs_paths_or_a_crate_not_both(crate):
    for argv in (["audit"], ["audit", "x.csv", "--crate", str(crate)]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_export_without_a_run_says_so(tmp_path, capsys):
    assert main(["export", "--results", str(tmp_path / "none"), "--out", str(tmp_path / "x.zip")]) == 1
    assert "no results directory" in capsys.readouterr().err
