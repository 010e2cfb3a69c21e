"""Weights are checked inputs, and a run can move: records store paths relative to the run's root,
`retrace audit` of a copy checks the copy, a mirror is named by its content (issue 29)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from retrace.store import models
from retrace.store.provenance import Provenance, audit
from retrace.util.atomic import portable, write_json
from retrace.util.hashing import sha256_file


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


@pytest.fixture
def weights(tmp_path, monkeypatch):
    """A run root holding a model's manifest and its weights, as stage model leaves them."""
    monkeypatch.chdir(tmp_path)
    gguf = Path("results/models/m/model.gguf")
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(bytes(range(256)) * 64)
    manifest = {"name": "m", "gguf": portable(gguf), "sha256": sha256_file(gguf), "params": 1}
    path = gguf.with_name("manifest.json")
    write_json(path, manifest)
    models.stamp_weights(manifest, path)
    return path


def test_a_manifest_names_its_weights_relative_to_the_run(weights):
    manifest = models.load_manifest(weights)
    assert models.weight_files(json.loads(weights.read_text()))[0][0] == "results/models/m/model.gguf"
    assert manifest["gguf"] == os.path.abspath("results/models/m/model.gguf")  # backends get a full path


def test_a_flipped_byte_in_the_weights_fails_the_load_naming_them(weights):
    flip(weights.with_name("model.gguf"))
    with pytest.raises(models.ModelError, match=r"weights results/models/m/model\.gguf changed"):
        models.load_manifest(weights)
    flip(weights.with_name("model.gguf"))  # restored: the same bytes load again
    models.load_manifest(weights)


def test_missing_weights_fail_the_load_naming_them(weights):
    weights.with_name("model.gguf").unlink()
    with pytest.raises(
        models.ModelError, match=r"weights results/models/m/model\.gguf named in .* are missing"
    ):
        models.load_manifest(weights)


def test_a_manifest_without_local_weights_loads(tmp_path):
    """A hub id the engine resolves itself, or the simulated engine: nothing to check."""
    path = tmp_path / "manifest.json"
    write_json(path, {"name": "hub-model", "hub": {"repo": "o/r", "revision": "a" * 40}})
    assert models.weight_files(json.loads(path.read_text())) == []
    assert models.load_manifest(path)["name"] == "hub-model"


def test_unchanged_weights_are_not_rehashed_and_a_copy_keeps_the_fast_path(weights, monkeypatch, tmp_path):
    copy = tmp_path.parent / (tmp_path.name + "-copy")
    shutil.copytree(tmp_path, copy, copy_function=shutil.copy2)  # like cp -a: mtimes kept
    monkeypatch.chdir(copy)

    def no_hash(path):
        raise AssertionError(f"{path} re-hashed although size and mtime match the stamp")

    monkeypatch.setattr(models, "sha256_file", no_hash)
    models.load_manifest(Path("results/models/m/manifest.json"))


def test_audit_of_a_copied_run_checks_the_copy(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    monkeypatch.chdir(run)
    src, out = Path("results/in.jsonl"), Path("results/out.json")
    src.write_text("input\n")
    Provenance("data", {}, [], extra={}).write(src)
    out.write_text("{}\n")
    Provenance("score", {}, [], inputs=[str(src)]).write(out)
    assert '"path": "results/in.jsonl"' in Path("results/out.json.prov.json").read_text()
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    monkeypatch.chdir(tmp_path)  # audit from elsewhere: the record's own run root is used
    node = audit(copy / "results/out.json")
    assert node.all_ok() and node.children[0].path == str(copy / "results/in.jsonl")
    flip(copy / "results/in.jsonl")
    assert not audit(copy / "results/out.json").all_ok()
    assert audit(run / "results/out.json").all_ok()  # the original is untouched and still passes


def test_audit_names_changed_weights(weights):
    # the companions stage `model` writes (retrace/stages/model.py)
    manifest = json.loads(weights.read_text())
    Provenance(
        "model",
        {},
        [],
        extra={
            "companions": [
                {"path": p, "sha256": d, "kind": "weights"} for p, d in models.weight_files(manifest)
            ]
        },
    ).write(weights)
    assert audit(weights).all_ok()
    flip(weights.with_name("model.gguf"))
    assert audit(weights).problems == [
        f"weights {Path.cwd() / 'results/models/m/model.gguf'} changed or is missing"
    ]


def test_portable_paths_are_relative_inside_the_run_and_absolute_outside(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert portable(tmp_path / "results" / "x") == "results/x"
    assert portable("/usr/lib/x") == "/usr/lib/x"
