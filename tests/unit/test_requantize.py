"""Requantized models (retrace.store.requantize, models.materialise with `source.requantize`), on a
tiny GGUF written here: two Q4_1 matrices, one float32 norm, a few metadata keys."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402

from retrace.store import models  # noqa: E402
from retrace.store.models import ModelError, materialise  # noqa: E402
from retrace.store.requantize import requantize  # noqa: E402


def tiny_gguf(path: Path) -> dict[str, np.ndarray]:
    """A GGUF like the package's (Q4_1 weights, a float32 norm); returns its float weights."""
    rng = np.random.default_rng(0)
    weights = {"blk.0.attn_q.weight": rng.normal(size=(4, 64)), "token_embd.weight": rng.normal(size=(8, 32))}
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(1)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_1))
    for name, x in weights.items():
        w.add_tensor(name, quantize(x.astype(np.float32), Q.Q4_1), raw_dtype=Q.Q4_1)
    w.add_tensor("blk.0.attn_norm.weight", np.linspace(0.5, 1.5, 64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return weights


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_quantized_tensors_become_the_target_and_everything_else_is_kept(tmp_path):
    src = tmp_path / "q41.gguf"
    weights = tiny_gguf(src)
    out = requantize(src, tmp_path / "q40.gguf", "Q4_0")
    before, after = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(out))
    types = {t.name: t.tensor_type for t in after.tensors}
    assert types == {
        "blk.0.attn_q.weight": Q.Q4_0,
        "token_embd.weight": Q.Q4_0,
        "blk.0.attn_norm.weight": Q.F32,
    }
    for t in after.tensors:
        old = next(o for o in before.tensors if o.name == t.name)
        assert list(t.shape) == list(old.shape)
        if t.name in weights:  # within a 4-bit step of the Q4_1 values it was made from
            step = np.abs(weights[t.name]).max() / 7
            assert np.abs(dequantize(t.data, Q.Q4_0) - dequantize(old.data, Q.Q4_1)).max() <= step
        else:
            assert np.array_equal(t.data, old.data)
    assert after.fields["tokenizer.ggml.tokens"].contents() == ["a", "b", "c"]
    assert after.fields["general.file_type"].contents() == int(gguf.LlamaFileType.MOSTLY_Q4_0)
    assert not list(tmp_path.glob("*.tmp"))


def test_the_same_input_gives_the_same_bytes(tmp_path):
    tiny_gguf(tmp_path / "q41.gguf")
    a = requantize(tmp_path / "q41.gguf", tmp_path / "a.gguf", "Q4_0")
    b = requantize(tmp_path / "q41.gguf", tmp_path / "b.gguf", "Q4_0")
    assert sha(a) == sha(b)
    assert sha(requantize(tmp_path / "q41.gguf", tmp_path / "c.gguf", "Q8_0")) != sha(a)


def test_an_unknown_type_is_named():
    with pytest.raises(ValueError, match="'Q3_X' is not one of"):
        requantize(Path("in.gguf"), Path("out.gguf"), "Q3_X")


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fake weights package holding the tiny Q4_1 GGUF; returns (source sha, Q4_0 sha)."""
    src = tmp_path / "pkg" / "tiny.gguf"
    src.parent.mkdir()
    tiny_gguf(src)
    monkeypatch.setattr(models, "package_files", lambda pkg: [src])
    monkeypatch.delenv("RETRACE_MODEL_CACHE", raising=False)
    return sha(src), sha(requantize(src, tmp_path / "expected.gguf", "Q4_0"))


def cfg(source_sha: str, result_sha: str) -> dict:
    source = {"kind": "pypi_gguf", "packages": ["tiny"], "sha256": source_sha}
    return {
        "name": "tiny-q40",
        "params": 1,
        "chat_template": None,
        "source": {**source, "requantize": {"type": "Q4_0", "sha256": result_sha}},
    }


def test_materialise_pins_the_result_and_names_its_origin(tmp_path, package):
    manifest, sources = materialise(cfg(*package), tmp_path / "out")
    assert manifest["sha256"] == manifest["fingerprint"] == package[1] == sha(tmp_path / "out" / "model.gguf")
    assert manifest["derived_from"] == {"sha256": package[0], "requantize": "Q4_0"}
    assert sources == [tmp_path / "pkg" / "tiny.gguf"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.gguf"]


def test_a_result_other_than_the_pinned_one_is_refused_and_keeps_earlier_weights(tmp_path, package):
    out = tmp_path / "out"
    materialise(cfg(*package), out)
    good = (out / "model.gguf").read_bytes()
    with pytest.raises(ModelError, match="differs from source.requantize.sha256"):
        materialise(cfg(package[0], "0" * 64), out)
    assert (
        sorted(p.name for p in out.iterdir()) == ["model.gguf"] and (out / "model.gguf").read_bytes() == good
    )


def test_a_changed_source_is_refused_before_requantizing(tmp_path, package):
    with pytest.raises(ModelError, match="sha256 mismatch"):
        materialise(cfg("1" * 64, package[1]), tmp_path / "out")


def test_the_cache_serves_later_runs_and_a_damaged_copy_is_made_again(tmp_path, package, monkeypatch):
    monkeypatch.setenv("RETRACE_MODEL_CACHE", str(tmp_path / "cache"))
    materialise(cfg(*package), tmp_path / "one")
    cached = tmp_path / "cache" / f"{package[1]}.gguf"
    assert sha(cached) == package[1]
    calls = []
    real = models._derive
    monkeypatch.setattr(models, "_derive", lambda *a: calls.append(a) or real(*a))
    materialise(cfg(*package), tmp_path / "two")
    assert calls == [] and sha(tmp_path / "two" / "model.gguf") == package[1]
    cached.write_bytes(b"damaged")
    materialise(cfg(*package), tmp_path / "three")
    assert len(calls) == 1 and sha(tmp_path / "three" / "model.gguf") == sha(cached) == package[1]
