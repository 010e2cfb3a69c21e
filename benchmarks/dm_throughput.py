"""DRR discriminator throughput at the paper's shape: rows/s of `dm.train` and `dm.predict`.

The paper's DM is Flan-T5-large (783M parameters) fine-tuned on 512-token inputs. Its weights
come from the hub, which a measuring machine may not reach, so the model here is randomly
initialised from Flan-T5-large's published shape (google/flan-t5-large config.json: d_model 1024,
d_ff 2816, 24 + 24 layers, 16 heads of 64, gated-GELU): the arithmetic per row, and so the
time, is the same as for the real weights. Inputs are filled to `--max-length` tokens. The
code measured is retrace's own (retrace.drr.dm.train/predict), so a slow path there shows here.

Run: python benchmarks/dm_throughput.py [--device cuda] [--rows 256] [--layers 24]
Prints `dm train rows/s (...)` and `dm predict rows/s (...)`, and the hours one epoch over
10,000 distilled rows would take at that rate (a figure for the DRR part of a GPU estimate).
"""

from __future__ import annotations

import argparse
import time

import torch
import transformers

from retrace.drr import dm
from retrace.drr import settings as dm_settings


def flan_t5_large_shape(tok, layers: int) -> transformers.T5Config:
    # google/flan-t5-large config.json; T5 pools at the last </s>, our tokenizer ends with [SEP]
    return transformers.T5Config(
        vocab_size=max(tok.vocab_size, 32128),
        d_model=1024,
        d_kv=64,
        d_ff=2816,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=16,
        feed_forward_proj="gated-gelu",
        num_labels=2,
        decoder_start_token_id=tok.pad_token_id,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id,
    )


def rows(n: int, words: int) -> list[dict]:
    """Rows long enough to fill max_length after truncation, half accepted, half rejected."""
    text = " ".join(f"step{i % 97}" for i in range(words))
    return [
        {
            "id": f"q{i}",
            "question": f"Question {i}: " + text,
            "context": [],
            "answer": str(i % 4),
            "rationale": text,
            "label": i % 2,
        }
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--layers", type=int, default=24, help="encoder and decoder layers (24: Flan-T5-large)")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=8)
    a = ap.parse_args()
    device = dm.resolve_device(a.device)
    tok = transformers.AutoTokenizer.from_pretrained(
        dm.backbone_path(dm_settings.defaults()["backbones"]["minilm"])
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_config(flan_t5_large_shape(tok, a.layers))
    params = sum(p.numel() for p in model.parameters()) / 1e6
    data = rows(a.rows, a.max_length)
    opts = {"lr": 1e-5, "weight_decay": 0.0, "warmup_steps": 0, "epochs": 1}
    opts |= {"batch_size": a.batch_size, "max_length": a.max_length, "device": device}
    dm.train(model, tok, data[: a.batch_size * 2], [], {0: 1.0, 1: 1.0}, opts)  # warm-up: kernels, allocator
    shape = f"T5 {params:.0f}M params, {device}, max_length {a.max_length}, batch {a.batch_size}"
    for name, run in (
        ("train", lambda: dm.train(model, tok, data, [], {0: 1.0, 1: 1.0}, opts)),
        ("predict", lambda: dm.predict(model, tok, data, a.max_length, device=device)),
    ):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        rate = len(data) / (time.perf_counter() - t0)
        print(
            f"dm {name} rows/s ({shape}): {rate:.2f}; one epoch over 10,000 rows: {1e4 / rate / 3600:.3f} h"
        )


if __name__ == "__main__":
    main()
