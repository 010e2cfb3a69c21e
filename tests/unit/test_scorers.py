"""Scorers (retrace.engine.scorers, retrace.engine.hf_reward): the judge's P(yes) arithmetic,
garbage handling, identity, and the hf_reward plumbing on a tiny random model built here."""

from __future__ import annotations

import math

import pytest
from fake_backend import FINGERPRINT
from judged_backend import judged_llm

from retrace.engine.scorers import LLMJudge, ScoreItem, build_scorer, yes_probability
from retrace.util.records import Completion, Problem, TokenLogprob

YES, NO = {"yes"}, {"no"}
PROBLEM = Problem(id="p1", question="What is 2+3?", gold="5")
JUDGE_CFG = {
    # every key of config/method/best_of_n.yaml's block (no default in code), top_logprobs 5
    "scorer": {
        "name": "llm_judge",
        "model": None,
        "top_logprobs": 5,
        "max_tokens": 1,
        "yes_words": ["yes"],
        "no_words": ["no"],
        "fallback": 0.5,
    },
    "templates": {"judge": "judge_correct.j2"},
}


def tok(token: str, logprob: float, *top: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(token, logprob, tuple(top))


def test_yes_probability_normalises_over_yes_and_no():
    t = tok("Yes", math.log(0.6), ("Yes", math.log(0.6)), ("No", math.log(0.2)), ("Maybe", math.log(0.2)))
    assert yes_probability(t, YES, NO) == pytest.approx(0.75)


def test_yes_variants_are_summed():
    t = tok(
        " Yes",
        math.log(0.3),
        (" Yes", math.log(0.3)),
        ("Yes", math.log(0.2)),
        ("yes", math.log(0.1)),
        (" no", math.log(0.4)),
    )
    assert yes_probability(t, YES, NO) == pytest.approx(0.6 / 1.0)


def test_chosen_token_counts_when_top_is_empty_and_lookalikes_do_not():
    assert yes_probability(tok("No", 0.0), YES, NO) == 0.0
    assert yes_probability(tok("Yesterday", -0.1, ("Nope", -0.5)), YES, NO) is None
    assert yes_probability(tok("Yes", float("nan"), ("No", math.log(0.5))), YES, NO) == 0.0


def judge(tmp_path, respond=lambda r: 0.5) -> LLMJudge:
    llm, _ = judged_llm(tmp_path, respond)
    return build_scorer(JUDGE_CFG, llm)


def completion(text: str, logprobs=None) -> Completion:
    return Completion(text=text, finish_reason="stop", prompt_tokens=3, generated_tokens=1, logprobs=logprobs)


@pytest.mark.parametrize(
    "c, expected, valid",
    [
        (completion("", None), 0.5, False),
        (completion("\ufffd??", ()), 0.5, False),
        (completion("banana", (tok("banana", -0.1, ("apple", -2.0)),)), 0.5, False),
        (completion("Yes.", None), 1.0, True),
        (completion("no", None), 0.0, True),
        (
            completion(
                "\n**Yes**",
                (
                    tok("\n", -0.01, ("\n", -0.01)),
                    tok("**", -0.1),
                    tok("Yes", math.log(0.9), ("Yes", math.log(0.9)), ("No", math.log(0.1))),
                ),
            ),
            0.9,
            True,
        ),
    ],
)
def test_garbage_gets_the_fallback_never_an_exception(tmp_path, c, expected, valid):
    value, ok = judge(tmp_path).read(c)
    assert value == pytest.approx(expected) and ok is valid


def test_judge_scores_through_the_cached_llm(tmp_path):
    seen = []

    def respond(request):
        seen.append(request)
        return 0.8 if "boxed{5}" in request.messages[-1].content else 0.1

    scorer = judge(tmp_path, respond)
    items = [ScoreItem(PROBLEM, "2+3=5 so \\boxed{5}"), ScoreItem(PROBLEM, "so \\boxed{6}", partial=True)]
    scores = scorer.score(items)
    assert [s.value for s in scores] == pytest.approx([0.8, 0.1])
    assert all(s.valid and s.key and s.generated_tokens == 1 for s in scores)
    assert {r.sampling.temperature for r in seen} == {0.0} and {r.sampling.logprobs for r in seen} == {5}
    assert "Steps so far" in seen[1].messages[0].content and "Solution:" in seen[0].messages[0].content
    again = scorer.score(items)  # served by the request cache
    assert len(seen) == 2 and [s.value for s in again] == [s.value for s in scores]
    ident = scorer.identity()
    assert ident["name"] == "llm_judge" and ident["model"] == FINGERPRINT
    assert len(ident["template_sha256"]) == 64


def test_another_judge_model_needs_its_engine(tmp_path):
    llm, _ = judged_llm(tmp_path, lambda r: 0.5)
    cfg = {**JUDGE_CFG, "scorer": {**JUDGE_CFG["scorer"], "model": "other-model"}}
    with pytest.raises(ValueError, match="scorer_llm"):
        build_scorer(cfg, llm)
    with pytest.raises(ValueError, match="unknown scorer"):
        build_scorer({"scorer": {"name": "oracle"}}, llm)


# --- hf_reward on a tiny random model (no hub) -------------------------------------------

CHAT = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<|user|>", "<|assistant|>", "<|end|>"]
    chars = [chr(i) for i in range(32, 127)] + ["\n"]
    vocab = {t: i for i, t in enumerate(specials + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<|end|>"
    )
    fast.chat_template = CHAT
    return fast


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    tokenizer = tiny_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
    )
    dirs = {}
    for kind, cls in [
        ("prm", transformers.LlamaForCausalLM),
        ("classifier", transformers.LlamaForSequenceClassification),
    ]:
        dirs[kind] = tmp_path_factory.mktemp(kind)
        cls(config).save_pretrained(dirs[kind])
        tokenizer.save_pretrained(dirs[kind])
    return dirs


def hf_scorer(path, kind, **extra):
    return build_scorer(
        {
            "scorer": {
                "name": "hf_reward",
                "path": str(path),
                "kind": kind,
                "device": "cpu",
                "dtype": "float32",
                "batch_size": 2,
                **extra,
            }
        },
        None,
    )


def test_prm_marks_every_step_and_scores_are_causal(tiny_models):
    scorer = hf_scorer(tiny_models["prm"], "prm", aggregate="last")
    solution = "2+3 is 5\n\nso \\boxed{5}\n\ncheck: ok"
    ids, marks = scorer.prm_inputs(PROBLEM.question, solution.split("\n\n"))
    plus, minus = scorer.tokenizer.convert_tokens_to_ids(["+", "-"])
    assert len(marks) == 3 and all(ids[at] == p == plus and m == minus for at, p, m in marks)
    [(three, n3), (one, n1)] = scorer.step_scores(
        [ScoreItem(PROBLEM, solution), ScoreItem(PROBLEM, "2+3 is 5")]
    )
    assert len(three) == 3 and len(one) == 1 and n3 > n1 and all(0.0 <= v <= 1.0 for v in three)
    # A causal model's verdict on step 1 cannot depend on later steps (or on padding).
    assert three[0] == pytest.approx(one[0], abs=1e-5)
    [last] = scorer.score([ScoreItem(PROBLEM, solution)])
    [low] = hf_scorer(tiny_models["prm"], "prm", aggregate="min").score([ScoreItem(PROBLEM, solution)])
    assert last.value == pytest.approx(three[-1], abs=1e-5) and low.value == pytest.approx(
        min(three), abs=1e-5
    )
    ident = scorer.identity()
    assert ident["name"] == "hf_reward" and len(ident["model"]) == 64 and ident["params"] > 0


def test_classifier_scores_in_unit_interval_regardless_of_batching(tiny_models):
    items = [
        ScoreItem(PROBLEM, "\\boxed{5}"),
        ScoreItem(PROBLEM, "a much longer wrong answer \\boxed{6}"),
        ScoreItem(PROBLEM, ""),
    ]
    batched = hf_scorer(tiny_models["classifier"], "classifier").score(items)
    single = hf_scorer(tiny_models["classifier"], "classifier", batch_size=1).score(items)
    assert [s.value for s in batched] == pytest.approx([s.value for s in single], abs=1e-5)
    assert all(0.0 < s.value < 1.0 for s in batched)


def test_generate_stage_wires_a_judge_only_for_another_model(tmp_path):
    import json as _json

    from retrace.planning.cells import scorer_model
    from retrace.stages.generate import judge_engine
    from retrace.store.cache import RequestCache

    cfg = {
        "model": {"name": "policy"},
        "backend": {"name": "scripted", "engine": {}},
        "method": {"name": "best_of_n", "scorer": {"name": "llm_judge", "model": None}},
    }
    assert scorer_model(cfg) is None
    cfg["method"]["scorer"]["model"] = "policy"  # the job's own model: no second engine
    assert scorer_model(cfg) is None
    cfg["method"]["scorer"]["model"] = "judge"
    assert scorer_model(cfg) == "judge"
    cache = RequestCache(tmp_path / "c.sqlite", job="t")
    with pytest.raises(ValueError, match="needs that model's manifest"):
        judge_engine(cfg, None, cache)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(_json.dumps({"name": "other", "fingerprint": "f", "params": 1}))
    with pytest.raises(ValueError, match="manifest of 'other', but scorer.model='judge'"):
        judge_engine(cfg, manifest, cache)
    manifest.write_text(_json.dumps({"name": "judge", "fingerprint": "f", "params": 1}))
    assert judge_engine(cfg, manifest, cache).model["name"] == "judge"
    cfg["method"]["scorer"] = {"name": "hf_reward", "model": "judge"}  # loads its own model
    assert scorer_model(cfg) is None
    cache.close()
