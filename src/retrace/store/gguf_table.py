"""The tensor table of a GGUF file (names, shapes, types), read without parsing its metadata.

    from retrace.store.gguf_table import tensor_shapes, param_count
    param_count(Path("model.gguf"))   # the number of weights, as llama.cpp counts them

gguf-py's GGUFReader builds a numpy view of every metadata value, which takes ~20 s for a
vocabulary of 151k tokens (Qwen2.5) and made the `model` stage slow; counting weights only
needs the tensor table that follows the metadata, so the metadata is skipped by its lengths.
Layout (GGUF v2/v3, little-endian, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
magic "GGUF", uint32 version, uint64 tensor count, uint64 key count; each key: string name,
uint32 value type, value; then each tensor: string name, uint32 n_dims, uint64 dims[n_dims],
uint32 ggml type, uint64 offset. A string is a uint64 length and its bytes.
"""

from __future__ import annotations

import math
import mmap
import struct
from pathlib import Path

# GGUF value types: 0-7 and 10-12 are fixed-size scalars (their byte sizes), 8 string, 9 array.
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """Not a GGUF file this reader understands."""


def tensor_shapes(path: Path) -> dict[str, tuple[tuple[int, ...], int]]:
    """{tensor name: (dims, ggml type)} in file order."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file (magic {bytes(buf[:4])!r})")
        version, n_tensors, n_keys = struct.unpack_from("<IQQ", buf, 4)
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or 3)")
        pos = 24
        for _ in range(n_keys):
            pos = _skip_string(buf, pos)
            (kind,) = struct.unpack_from("<I", buf, pos)
            pos = _skip_value(buf, pos + 4, kind)
        table = {}
        for _ in range(n_tensors):
            (length,) = struct.unpack_from("<Q", buf, pos)
            name = buf[pos + 8 : pos + 8 + length].decode()
            pos += 8 + length
            (n_dims,) = struct.unpack_from("<I", buf, pos)
            dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
            (ggml_type,) = struct.unpack_from("<I", buf, pos + 4 + 8 * n_dims)
            pos += 4 + 8 * n_dims + 4 + 8
            table[name] = (tuple(dims), ggml_type)
        return table


def param_count(path: Path) -> int:
    """The number of weights in a GGUF file: the sum of its tensors' element counts."""
    return sum(math.prod(dims) for dims, _ in tensor_shapes(path).values())


def _skip_string(buf, pos: int) -> int:
    (length,) = struct.unpack_from("<Q", buf, pos)
    return pos + 8 + length


def _skip_value(buf, pos: int, kind: int) -> int:
    if kind in _SIZES:
        return pos + _SIZES[kind]
    if kind == _STRING:
        return _skip_string(buf, pos)
    if kind != _ARRAY:
        raise GGUFError(f"unknown GGUF value type {kind} at byte {pos}")
    item, count = struct.unpack_from("<IQ", buf, pos)
    pos += 12
    if item in _SIZES:
        return pos + _SIZES[item] * count
    for _ in range(count):  # strings (a vocabulary) or nested arrays: walked one by one
        pos = _skip_value(buf, pos, item)
    return pos
