"""The SFT-LoRA baseline (Section 4.2): LoRA on the reasoner with the DRR-train questions.

    examples = sft_examples(problems, tokenizer)          # standard QA prompt -> "Answer: <gold index>"
    model = add_lora(model, r=8, alpha=16)                # peft; only adapter weights train
    losses = train_lora(model, examples, lr=2e-4, epochs=1, seed=0)
    letter = answer(model, tokenizer, problem)            # greedy decode, parsed like DRR replies
    run(cfg, train_files, eval_files, names, seed, outs)  # stage `drr sft`: train once, episodes per dataset

Needs the reasoner as a Hugging Face causal LM (not the GGUF the CPU profile runs): with
`drr.sft_lora.enabled: true` and `hf_model` set (a hub id at a pinned `revision`, or a local
folder), the workflow runs `drr sft` (workflow/rules/drr.smk) and the report compares DRR with
it; off by default (the CPU default has no HF weights of its reasoner). Unit-tested on a tiny
randomly initialised causal LM. The target carries the gold by design (it is supervised
fine-tuning); these examples are training data, never prompts, so the leak check does not
apply to them. The paper does not print its SFT target format; here it is the Standard QA
Prompt's own format with the gold index and no rationale.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from retrace.drr import prompts, settings
from retrace.tasks.base import LETTERS
from retrace.util.records import Problem


def prompt_text(problem: Problem, tokenizer) -> str:
    """The Standard QA prompt as the causal LM sees it (its chat template when it has one)."""
    msgs = [
        {"role": m.role, "content": m.content} for m in prompts.turn_messages(problem, [], 0, "exploration")
    ]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in msgs) + "\n\n"


def sft_examples(problems: Sequence[Problem], tokenizer, max_length: int = 512) -> list[dict]:
    """input_ids/labels per question; prompt tokens are masked (-100), only the answer trains."""
    out = []
    for p in problems:
        prompt = tokenizer(prompt_text(p, tokenizer), add_special_tokens=False)["input_ids"]
        target = tokenizer(f"Answer: {LETTERS.index(p.gold)}", add_special_tokens=False)["input_ids"]
        if tokenizer.eos_token_id is not None:
            target = target + [tokenizer.eos_token_id]
        ids = (prompt + target)[-max_length:]
        labels = ([-100] * len(prompt) + target)[-max_length:]
        out.append({"id": p.id, "input_ids": ids, "labels": labels})
    return out


def add_lora(model, r: int = 8, alpha: int = 16, dropout: float = 0.0, target_modules=None):
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        task_type="CAUSAL_LM",
        target_modules=target_modules or ["q_proj", "v_proj"],
    )
    return get_peft_model(model, cfg)


def trainable_parameters(model) -> int:
    """Parameters the optimiser updates (a LoRA's adapters only): recorded beside the DM's own
    count, since the paper matches SFT-LoRA's trained parameters to the DM's (Section 4.2) and
    retrace does not (deviations register, drr_paper sft-lora-parameters)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _device(model):
    return next(model.parameters()).device


def train_lora(
    model, examples: Sequence[dict], lr: float = 2e-4, epochs: int = 1, seed: int = 0
) -> list[float]:
    """Plain AdamW over the trainable (adapter) parameters, one example per step, on the
    model's device; the losses."""
    import torch

    torch.manual_seed(seed)
    dev = _device(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr)
    order, rng, losses = list(range(len(examples))), random.Random(f"{seed}:sft"), []
    model.train()
    for _ in range(epochs):
        rng.shuffle(order)
        for i in order:
            ex = examples[i]
            out = model(
                input_ids=torch.tensor([ex["input_ids"]], device=dev),
                labels=torch.tensor([ex["labels"]], device=dev),
            )
            opt.zero_grad()
            out.loss.backward()
            opt.step()
            losses.append(float(out.loss.detach()))
    return losses


def answer(model, tokenizer, problem: Problem, max_new_tokens: int = 16) -> str | None:
    """Greedy reply to the Standard QA prompt, parsed as a DRR reply (None if unparseable)."""
    import torch

    ids = tokenizer(prompt_text(problem, tokenizer), add_special_tokens=False, return_tensors="pt")[
        "input_ids"
    ].to(_device(model))
    model.eval()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
        )
    text = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    return prompts.reply_letter(text, problem.choices or ())


def load_reasoner(spec: dict):
    """(tokenizer, causal LM) of `sft_lora.hf_model` at `sft_lora.revision`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"revision": spec["revision"]} if spec.get("revision") else {}
    return (
        AutoTokenizer.from_pretrained(spec["hf_model"], **kw),
        AutoModelForCausalLM.from_pretrained(spec["hf_model"], **kw),
    )


def episode(problem: Problem, letter: str | None) -> dict:
    """A one-turn episode (no judge), scored like the other zero-judge baselines."""
    return {
        "id": problem.id,
        "status": "answered",
        "turns": [
            {
                "answer": letter or "",
                "rationale": "",
                "letter": letter,
                "abstain": False,
                "decision": None,
                "correct": letter == problem.gold,
            }
        ],
    }


def run(cfg: dict, train_files: Sequence, eval_files: Sequence, outs: Sequence, seed: int = 0) -> dict:
    """Stage `drr sft`: one LoRA on every DRR-train question (as the DM is trained once for all
    datasets), then greedy answers on each dataset's evaluation questions -> `outs[i]`."""
    from retrace.drr import dm
    from retrace.store import data

    spec = cfg["sft_lora"]
    if spec.get("hf_model") == settings.SIMULATED:
        return simulated_run(cfg, train_files, eval_files, outs, seed)
    tok, model = load_reasoner(spec)
    model.to(dm.resolve_device(spec.get("device", "auto")))
    lora = add_lora(model, r=int(spec["r"]), alpha=int(spec["alpha"]))
    train = [p for f in train_files for p in data.read_problems(f)]
    losses = train_lora(
        lora, sft_examples(train, tok, int(spec["max_length"])), float(spec["lr"]), int(spec["epochs"]), seed
    )
    for f, out in zip(eval_files, outs):
        eps = [episode(p, answer(lora, tok, p)) for p in data.read_problems(f)]
        hf_model = {k: spec.get(k) for k in ("hf_model", "revision")}
        counts = {
            "trainable_params": trainable_parameters(lora),
            "dm_params": cfg["backbones"][cfg["backbone"]].get("params"),
        }
        _write(
            cfg,
            train_files,
            f,
            out,
            eps,
            seed,
            losses=losses,
            device=str(_device(lora)),
            hf_model=hf_model,
            **counts,
            ran={"sft_lora": "hf"},
        )
    return {"losses": losses}


SIM_LABEL = "sft_lora"  # the simulated engine's label: effects may be planted on it by name
SIM_MAX_TOKENS = 1_000_000  # the simulated reply always ends in its answer (no length cut)


def simulated_run(
    cfg: dict, train_files: Sequence, eval_files: Sequence, outs: Sequence, seed: int = 0
) -> dict:
    """SFT-LoRA in a rehearsal (`sft_lora.hf_model: simulated`, written by
    retrace.app.rehearse_workflow): NOT a model, no weights are tuned. Each evaluation question is
    answered once, greedily, by the simulated engine (backends/simulated.py) as the reasoner's
    model under the label `sft_lora`: the same question difficulties as the reasoner's own
    turns, planted points from the effects YAML (null without). The reply is parsed and scored
    as a real SFT-LoRA reply is (`prompts.reply_letter`, `episode`), so DRR-vs-SFT-LoRA rows
    reach claims.csv through the real code. Not covered: learning from the train questions
    (read only for provenance)."""
    from retrace.config.compose import compose
    from retrace.store import data
    from retrace.util.records import Message, Request, Sampling
    from retrace.util.registry import BACKENDS

    engine = compose({"backend": "simulated"})["backend"]["engine"]
    model = {"name": cfg["models"][0]}
    for f, out in zip(eval_files, outs, strict=True):
        problems = data.read_problems(f)
        sim = BACKENDS.get("simulated")(
            model, {**engine, "problems": str(f), "dataset": Path(f).parent.name, "label": SIM_LABEL}
        )
        greedy = Sampling(temperature=0.0, max_tokens=SIM_MAX_TOKENS, seed=seed)
        asks = [Request(messages=(Message("user", p.question),), sampling=greedy, tag=p.id) for p in problems]
        replies = sim.generate(asks)
        eps = [
            episode(p, prompts.reply_letter(r.text, p.choices or ()))
            for p, r in zip(problems, replies, strict=True)
        ]
        hf_model = {"hf_model": settings.SIMULATED}
        ran = {"sft_lora": "simulated"}  # drr/report.py: such rows read engine=simulated
        _write(cfg, train_files, f, out, eps, seed, simulated=True, hf_model=hf_model, ran=ran)
    return {"losses": []}


def _write(cfg: dict, train_files: Sequence, eval_file, out, eps: list, seed: int, **extra) -> None:
    """One dataset's SFT-LoRA episodes and their provenance record (train files + its eval file)."""
    from retrace.util.atomic import write_jsonl

    write_jsonl(out, eps)
    settings.provenance("sft", cfg, list(train_files) + [eval_file], seeds={"run": seed}, **extra).write(out)
