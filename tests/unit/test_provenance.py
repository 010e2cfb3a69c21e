"""Provenance records and `audit` (retrace.store.provenance) on a chain source → A → B."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from retrace.store.provenance import (
    Provenance,
    audit,
    audit_results_table,
    lineage_records,
    load,
    prov_path,
    run_root,
)
from retrace.util.hashing import sha256_file


def flip_byte(path: Path, offset: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def culprits(node) -> dict[str, list[str]]:
    """path → problems, for every node of the audit tree that reports a problem."""
    out = {node.path: node.problems} if node.problems else {}
    for child in node.children:
        out.update(culprits(child))
    return out


@pytest.fixture
def chain(tmp_path):
    code = tmp_path / "stage_code.py"
    code.write_text("def run(): pass\n")
    source = tmp_path / "source.jsonl"
    source.write_text('{"id": 1}\n')
    a, b = tmp_path / "a.jsonl", tmp_path / "b.json"
    a.write_text('{"id": 1, "answer": 7}\n')
    Provenance("data", {"dataset": "x"}, [str(code)], inputs=[str(source)]).write(a)
    b.write_text('{"accuracy": 1.0}\n')
    Provenance("score", {"n_boot": 10}, [str(code)], inputs=[str(a)], extra={"usage": {"requests": 1}}).write(
        b
    )
    return source, a, b


def test_record_describes_artifact_inputs_and_code(chain, tmp_path):
    source, a, b = chain
    rec = load(b)
    assert rec["artifact"]["sha256"] == sha256_file(b)
    assert rec["stage"] == "score" and rec["usage"] == {"requests": 1}
    [inp] = rec["inputs"]
    assert inp["sha256"] == sha256_file(a) and inp["prov_sha256"] == sha256_file(prov_path(a))
    assert "prov" not in load(a)["inputs"][0]  # the source has no record of its own
    assert rec["code"]["sources_hash"] == load(a)["code"]["sources_hash"]


def test_config_hash_follows_the_config(tmp_path):
    art = tmp_path / "x"
    art.write_text("x")
    one = Provenance("s", {"k": 1}, []).record(art)
    same = Provenance("s", {"k": 1}, []).record(art)
    other = Provenance("s", {"k": 2}, []).record(art)
    assert one["config_hash"] == same["config_hash"] != other["config_hash"]


def test_untouched_chain_passes(chain):
    source, a, b = chain
    node = audit(b)
    assert node.all_ok(), "\n".join(node.lines())
    assert culprits(node) == {}
    assert [c.path for c in node.children] == [str(a)]
    assert [c.path for c in node.children[0].children] == [f"{source}  (source)"]


def test_changed_source_is_named(chain):
    source, a, b = chain
    flip_byte(source)
    node = audit(b)
    assert not node.all_ok()
    assert culprits(node) == {
        f"{source}  (source)": ["input bytes differ from the hash recorded by its consumer"]
    }


def test_changed_intermediate_artifact_is_named(chain):
    source, a, b = chain
    flip_byte(a, offset=3)
    node = audit(b)
    assert not node.all_ok()
    bad = culprits(node)
    assert list(bad) == [str(a)]
    assert "artifact bytes changed since its record was written" in bad[str(a)]
    assert "input bytes differ from the hash recorded by its consumer" in bad[str(a)]


def test_changed_intermediate_record_is_named(chain):
    source, a, b = chain
    record = prov_path(a)
    text = record.read_text()
    i = text.index('"stage": "data"') + len('"stage": "')
    flip_byte(record, offset=i)  # "data" → "eata": still valid JSON
    node = audit(b)
    assert not node.all_ok()
    assert culprits(node) == {str(a): [f"input's provenance record {a}.prov.json changed or is missing"]}


def test_corrupt_record_is_reported_not_raised(chain):
    source, a, b = chain
    flip_byte(prov_path(a), offset=0)  # "{" → "z": no longer JSON
    node = audit(b)
    assert not node.all_ok()
    bad = culprits(node)[str(a)]
    assert any("unreadable" in p for p in bad)
    assert f"input's provenance record {prov_path(a)} changed or is missing" in bad


def test_deleted_intermediate_is_named(chain):
    source, a, b = chain
    a.unlink()
    node = audit(b)
    assert not node.all_ok()
    assert culprits(node) == {str(a): ["input missing"]}


def test_artifact_without_record_fails(tmp_path):
    lone = tmp_path / "lone.txt"
    lone.write_text("x")
    node = audit(lone)
    assert not node.all_ok() and "no provenance record" in node.problems[0]
    assert audit(tmp_path / "absent").problems == ["missing"]


def test_companion_by_product_is_checked(tmp_path):
    art, side = tmp_path / "gen.jsonl", tmp_path / "gen.log"
    art.write_text("x")
    side.write_text("log")
    Provenance(
        "generate", {}, [], extra={"companions": [{"path": str(side), "sha256": sha256_file(side)}]}
    ).write(art)
    assert audit(art).all_ok()
    side.write_text("log edited")
    assert audit(art).problems == [f"by-product {side} changed or is missing"]


def test_a_changed_by_product_of_an_ancestor_fails_the_audit_of_its_descendant(tmp_path):
    """An intermediate's weights or by-product changed after its record was written: the
    intermediate itself and its own record are intact, so only its own verdict can fail the
    audit of what was made from it (a model's weights, then the generations that used them)."""
    weights, manifest, out = tmp_path / "model.gguf", tmp_path / "manifest.json", tmp_path / "gen.jsonl"
    weights.write_bytes(b"weights")
    manifest.write_text('{"gguf": "model.gguf"}\n')
    companion = {"path": str(weights), "sha256": sha256_file(weights), "kind": "weights"}
    Provenance("model", {}, [], extra={"companions": [companion]}).write(manifest)
    out.write_text('{"answer": 7}\n')
    Provenance("generate", {}, [], inputs=[str(manifest)]).write(out)
    assert audit(out).all_ok()
    flip_byte(weights)
    node = audit(out)
    assert not node.all_ok()
    assert not node.children[0].ok  # the intermediate's own verdict, not only its listed problems
    assert culprits(node) == {str(manifest): [f"weights {weights} changed or is missing"]}


def write_table(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["method", "score_file", "prov_sha256"])
        w.writeheader()
        w.writerows(rows)


def test_results_table_detects_a_stale_prov_hash(chain, tmp_path):
    source, a, b = chain
    table = tmp_path / "results.csv"
    current = sha256_file(prov_path(b))
    write_table(
        table,
        [
            {"method": "greedy", "score_file": str(b), "prov_sha256": current},
            {"method": "majority", "score_file": str(b), "prov_sha256": "0" * 64},
            {"method": "refine", "score_file": str(tmp_path / "nope.json"), "prov_sha256": current},
        ],
    )
    problems = audit_results_table(table)
    assert len(problems) == 2
    assert problems[0].startswith(f"{table}:3:") and "does not match" in problems[0]
    assert problems[1].startswith(f"{table}:4:") and "missing" in problems[1]


def test_results_table_goes_stale_when_the_score_is_rewritten(chain, tmp_path):
    source, a, b = chain
    table = tmp_path / "results.csv"
    write_table(table, [{"method": "greedy", "score_file": str(b), "prov_sha256": sha256_file(prov_path(b))}])
    assert audit_results_table(table) == []
    b.write_text('{"accuracy": 0.5}\n')
    Provenance("score", {"n_boot": 10}, [], inputs=[str(a)]).write(b)
    assert len(audit_results_table(table)) == 1


def test_executor_names_the_slurm_job_and_node():
    from retrace.store.provenance import executor_info

    env = {
        "SLURM_JOB_ID": "4242",
        "SLURMD_NODENAME": "gpu017",
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_ACCOUNT": "lab",
        "HOME": "/root",
    }
    info = executor_info(env)
    assert info == {
        "kind": "slurm",
        "node": "gpu017",
        "SLURM_JOB_ID": "4242",
        "SLURMD_NODENAME": "gpu017",
        "SLURM_JOB_PARTITION": "gpu",
        "SLURM_JOB_ACCOUNT": "lab",
    }
    local = executor_info({"HOME": "/root"})
    assert local["kind"] == "local" and local["node"]


def test_every_record_carries_the_executor(tmp_path, monkeypatch):
    from retrace.store.provenance import SLURM_VARS

    for var in SLURM_VARS:  # the test itself may run inside a SLURM job
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURMD_NODENAME", "n1")
    art = tmp_path / "a.txt"
    art.write_text("x")
    Provenance("stage", {}, []).write(art)
    assert load(art)["host"]["executor"] == {
        "kind": "slurm",
        "node": "n1",
        "SLURM_JOB_ID": "7",
        "SLURMD_NODENAME": "n1",
    }


def test_the_audit_reads_as_an_indented_tree_naming_each_problem(chain):
    source, a, b = chain
    flip_byte(source)
    node = audit(b)
    assert list(node.lines()) == [
        f"[ok ] {b}",
        f"  [ok ] {a}",
        f"    [BAD] {source}  (source)\n          ! input bytes differ from the hash recorded by its consumer",
    ]
    assert [n.path for n in node.walk()] == [str(b), str(a), f"{source}  (source)"]


def test_a_missing_artifact_or_an_unreadable_record_is_a_failed_node(tmp_path):
    assert not audit(tmp_path / "absent").ok
    art = tmp_path / "x.json"
    art.write_text("{}")
    prov_path(art).write_text("{not json")
    node = audit(art)
    assert not node.ok and "unreadable" in node.problems[0]


def test_a_record_is_read_from_the_working_directory_when_its_path_is_not_where_it_sits(tmp_path):
    rec = {"artifact": {"path": "results/out.json"}}
    assert run_root(tmp_path / "run/results/out.json", rec) == tmp_path / "run"
    assert run_root(tmp_path / "elsewhere/out.json", rec) == Path.cwd()
    assert (
        run_root(tmp_path / "run/results/out.json", {"artifact": {"path": "/abs/results/out.json"}})
        == Path.cwd()
    )


def test_the_lineage_is_every_ancestor_record_past_a_missing_one(chain, tmp_path):
    """c is made from b (from a, from the source) and from m, whose record is gone: the lineage
    still holds the records of b and a (a claims row may cite any ancestor's record)."""
    source, a, b = chain
    m, c = tmp_path / "m.json", tmp_path / "c.json"
    m.write_text("{}")
    Provenance("score", {}, []).write(m)
    c.write_text("{}")
    Provenance("claims", {}, [], inputs=[str(b), str(m)]).write(c)
    prov_path(m).unlink()
    assert lineage_records(c) == {
        sha256_file(prov_path(b)),
        sha256_file(prov_path(a)),
        load(c)["inputs"][1]["prov_sha256"],
    }
    assert lineage_records(source) == set()
