"""SFT-LoRA baseline on a tiny randomly initialised causal LM (no download): only the adapter
trains, the loss falls on the training questions, and the prompt tokens are masked."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from retrace.drr import dm, sft  # noqa: E402
from tests.unit.drr_fakes import PROBLEMS, cfg  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    tok = transformers.AutoTokenizer.from_pretrained(dm.backbone_path(cfg()["backbones"]["minilm"]))
    tok.eos_token = tok.sep_token
    c = transformers.LlamaConfig(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                 max_position_embeddings=512, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.sep_token_id)
    torch.manual_seed(0)
    return tok, transformers.AutoModelForCausalLM.from_config(c)


def test_examples_mask_the_prompt_and_target_the_gold_index(tiny):
    tok, _ = tiny
    ex = sft.sft_examples(PROBLEMS[:1], tok)[0]
    target = [t for t, y in zip(ex["input_ids"], ex["labels"]) if y != -100]
    assert tok.decode(target, skip_special_tokens=True).replace(" ", "") == "answer:1"
    assert ex["labels"][0] == -100 and len(ex["labels"]) == len(ex["input_ids"])


def test_lora_trains_only_the_adapter_and_the_loss_falls(tiny):
    tok, model = tiny
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    lora = sft.add_lora(model, r=4, alpha=8)
    trainable = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    examples = sft.sft_examples(PROBLEMS, tok)
    losses = sft.train_lora(lora, examples, lr=1e-2, epochs=8)
    assert sum(losses[-4:]) < sum(losses[:4])
    for n, p in lora.named_parameters():
        if "lora_" not in n:
            key = n.replace("base_model.model.", "").replace(".base_layer", "")
            assert torch.equal(p, base[key]), n
    assert sft.answer(lora, tok, PROBLEMS[0], max_new_tokens=4) in (None, "A", "B", "C", "D")
