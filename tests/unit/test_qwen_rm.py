"""RM@N's Qwen2.5-Math reward model (config/method/best_of_n_qwen_rm.yaml) through the
existing hf_reward path, on a tiny random model of its architecture (no hub).

Qwen2.5-Math-RM-72B ships its model as remote code (config.json auto_map: AutoModel ->
modeling_qwen2_rm.Qwen2ForRewardModel): a Qwen2 decoder, a Linear-ReLU-Linear score head
on every position, and the reward read at each sequence's last non-pad token. REMOTE_CODE
below is that layout at toy size, written into the model folder with the same auto_map, so
the scorer loads it exactly as it would load the hub repo: AutoModel + trust_remote_code."""

from __future__ import annotations

import json

import pytest
import yaml

from retrace.config.compose import CONFIG_DIR
from retrace.engine.scorers import ScoreItem, build_scorer
from retrace.util.records import Problem

REMOTE_CODE = """
import torch
from torch import nn
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast


class Qwen2ForRewardModel(Qwen2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 1
        self.model = Qwen2Model(config)
        self.score = nn.Sequential(
            nn.Linear(config.hidden_size, config.hidden_size), nn.ReLU(), nn.Linear(config.hidden_size, 1)
        )
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
        logits = self.score(hidden)
        last = torch.eq(input_ids, self.config.pad_token_id).int().argmax(-1) - 1
        last = last % input_ids.shape[-1]
        pooled = logits[torch.arange(input_ids.shape[0], device=logits.device), last]
        return SequenceClassifierOutputWithPast(logits=pooled)
"""
PROBLEM = Problem("p1", "What is 2+3?", "5")


@pytest.fixture(scope="module")
def tiny_qwen_rm(tmp_path_factory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import importlib.util

    import torch
    from test_scorers import tiny_tokenizer

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("qwen_rm")
    (folder / "modeling_qwen2_rm.py").write_text(REMOTE_CODE)
    spec = importlib.util.spec_from_file_location("modeling_qwen2_rm", folder / "modeling_qwen2_rm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokenizer = tiny_tokenizer()
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForRewardModel"],
        auto_map={"AutoModel": "modeling_qwen2_rm.Qwen2ForRewardModel"},
    )
    module.Qwen2ForRewardModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def scorer(folder, **changes):
    """The yaml's scorer block, pointed at the tiny folder (path instead of repo/revision)."""
    block = yaml.safe_load((CONFIG_DIR / "method" / "best_of_n_qwen_rm.yaml").read_text())["scorer"]
    block = {**block, "path": str(folder), "device": "cpu", "dtype": "float32", "device_map": None, **changes}
    return build_scorer({"scorer": block}, None)


def test_the_config_loads_the_repos_remote_code_as_an_outcome_reward(tiny_qwen_rm):
    s = scorer(tiny_qwen_rm)
    [score] = s.score([ScoreItem(PROBLEM, "2+3 = \\boxed{5}")])
    assert type(s.model).__name__ == "Qwen2ForRewardModel"  # the folder's remote code, not a built-in class
    assert json.loads((tiny_qwen_rm / "config.json").read_text())["auto_map"]["AutoModel"].endswith(
        "Qwen2ForRewardModel"
    )
    import torch

    ids = s.render(
        [{"role": "user", "content": PROBLEM.question}, {"role": "assistant", "content": "2+3 = \\boxed{5}"}]
    )
    with torch.inference_mode():
        hidden = s.model.model(input_ids=torch.tensor([ids]))[0]
        expected = float(s.model.score(hidden)[0, -1, 0])  # the raw reward at the last token
    assert score.value == pytest.approx(expected, abs=1e-5) and score.prompt_tokens == len(ids)


def test_rewards_do_not_depend_on_batching_or_padding(tiny_qwen_rm):
    items = [
        ScoreItem(PROBLEM, "\\boxed{5}"),
        ScoreItem(PROBLEM, "a much longer and wrong chain of thought \\boxed{6}"),
        ScoreItem(PROBLEM, ""),
    ]
    batched = scorer(tiny_qwen_rm).score(items)
    single = scorer(tiny_qwen_rm, batch_size=1).score(items)
    assert [s.value for s in batched] == pytest.approx([s.value for s in single], abs=1e-5)
    assert len({round(s.value, 6) for s in batched}) == 3  # raw rewards (squash: none), not a constant


def test_paper_yaml_scores_qwen2_5_math_7b_rm_at_n_with_it_pinned():
    from retrace.config.compose import check_global
    from retrace.planning.plan import jobs
    from retrace.planning.preflight import SHA1

    rm = [
        j.config()["method"]["scorer"]
        for j in jobs(check_global({"experiment": "paper"}))
        if j.label == "best_of_n" and j.model == "qwen2.5-math-7b"
    ]
    assert rm and {s["repo"] for s in rm} == {"Qwen/Qwen2.5-Math-RM-72B"}
    assert all(SHA1.match(s["revision"]) for s in rm)
