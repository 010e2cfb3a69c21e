"""The GGUF tensor-table reader (retrace.store.gguf_table) against gguf-py's full reader."""

from __future__ import annotations

import pytest

gguf = pytest.importorskip("gguf")

from retrace.store.gguf_table import GGUFError, param_count, tensor_shapes  # noqa: E402
from retrace.store.models import gguf_param_count  # noqa: E402
from tests.unit.test_requantize import tiny_gguf  # noqa: E402


def test_the_table_equals_gguf_py_s_after_skipping_strings_and_arrays(tmp_path):
    path = tmp_path / "tiny.gguf"
    tiny_gguf(path)  # its metadata holds a string, a string array and integers
    reader = gguf.GGUFReader(str(path))
    expected = {t.name: (tuple(int(d) for d in t.shape), int(t.tensor_type)) for t in reader.tensors}
    assert tensor_shapes(path) == expected
    assert param_count(path) == sum(int(t.n_elements) for t in reader.tensors) == 4 * 64 + 8 * 32 + 64


def test_a_file_that_is_not_gguf_is_named_and_the_count_falls_back(tmp_path):
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"PK\x03\x04 not a gguf at all" * 4)
    with pytest.raises(GGUFError, match=r"weights.bin: not a GGUF file"):
        tensor_shapes(bad)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    assert gguf_param_count(bad) is None and gguf_param_count(empty) is None
