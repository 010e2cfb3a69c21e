"""`hf_reward`: a hub reward model scoring solutions through transformers (for GPU runs).

    scorer:
      name: hf_reward
      repo: RLHFlow/Llama3.1-8B-PRM-Deepseek-Data   # or `path:` a local directory
      revision: null          # a commit; null = whatever the local HF cache holds
      kind: prm               # prm | classifier
      aggregate: min          # prm only: last | min | prod | mean over the step scores
      device: auto            # auto | cpu | cuda
      device_map: null        # "auto": transformers/accelerate place the model (GPU boxes)
      dtype: bfloat16
      batch_size: 4

Two kinds:
- `prm`: a causal LM trained to answer "+" (step correct) or "-" after each step, in
  RLHFlow's layout (https://github.com/RLHFlow/RLHF-Reward-Modeling/tree/main/math-rm):
  user turns carry the steps (the first prefixed by the question), each assistant turn
  is "+". A step's score is softmax(logit("+"), logit("-"))[0] at the position that
  predicts its assistant turn; the solution's score aggregates the steps
  (search-and-learn aggregates with last / min / prod). Steps are split on blank lines.
- `classifier`: a sequence classifier with one output (e.g. an ORM head) over the chat
  [user: question, assistant: solution]; the score is sigmoid(logit), or the raw value
  with `squash: none`. `auto_class: AutoModel` plus `trust_remote_code: true` loads
  remote-code RMs such as Qwen2.5-Math-RM-72B, whose first output is the reward.

The model is loaded on first use (torch and transformers are imported only then). Given the
job's request cache (build_scorer passes the CachedLLM's), scores are cached like generations
(retrace.engine.reward_cache: keyed by reward model, revision, scoring settings, question and
solution), so a killed RM@N job's rerun scores only what is missing and one that finds every
score never loads the model. With `device_map` and `gpus: k` (GPUs of its own beside the
policy's, which vLLM takes first), the model is placed on the last k visible GPUs only
(`max_memory`, REWARD_GPU_SHARE of each), never on the policy's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrace.engine.reward_cache import cached_scores
from retrace.engine.scorers import Score, ScoreItem, Scorer
from retrace.util.hashing import sha256_file, sha256_json

REWARD_GPU_SHARE = 0.9  # of a reward model's own GPUs its weights may fill (activations need the rest)

AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "last": lambda s: s[-1],
    "min": min,
    "mean": lambda s: sum(s) / len(s),
    "prod": lambda s: math.prod(s),
}
# What a `scorer:` block may leave out, in one place (read plainly through HFReward.opts). The
# cache key reads the block as written (reward_id), so stating a default there is a new key.
DEFAULTS = {
    "kind": "prm",
    "aggregate": "last",
    "plus": "+",
    "minus": "-",
    "squash": "sigmoid",
    "device": "auto",
    "dtype": "auto",
    "trust_remote_code": False,
    "batch_size": 4,
}


def split_steps(solution: str, separator: str = "\n\n") -> list[str]:
    """Non-empty steps of a solution; an empty solution is one empty step (still scored)."""
    steps = [s.strip() for s in solution.split(separator) if s.strip()]
    return steps or [""]


class HFReward(Scorer):
    name = "hf_reward"

    def __init__(self, cfg: dict, cache: Any = None):
        self.cfg, self.cache = cfg, cache
        self.opts = {**DEFAULTS, **cfg}  # the block with its defaults filled in
        self.kind = self.opts["kind"]
        if self.kind not in ("prm", "classifier"):
            raise ValueError(f"hf_reward kind {self.kind!r}: expected prm or classifier")
        self.aggregate = AGGREGATES[self.opts["aggregate"]]
        self.plus, self.minus = self.opts["plus"], self.opts["minus"]
        self.tokenizer: Any = None  # transformers' objects, loaded by load()
        self.model: Any = None
        self._fingerprint: str | None = None

    def load(self) -> None:
        if self.model is not None:
            return
        import torch
        import transformers

        source = self.cfg.get("path") or self.cfg["repo"]
        kwargs = {"trust_remote_code": bool(self.opts["trust_remote_code"])}
        if not self.cfg.get("path") and self.cfg.get("revision"):
            kwargs["revision"] = self.cfg["revision"]
        default = "AutoModelForCausalLM" if self.kind == "prm" else "AutoModelForSequenceClassification"
        auto = getattr(transformers, self.cfg.get("auto_class", default))
        dtype = self.opts["dtype"]
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, **kwargs)
        if self.cfg.get("device_map"):  # accelerate places (and may shard) the model itself
            kwargs["device_map"] = self.cfg["device_map"]
            kwargs.update(own_gpus_memory(int(self.cfg.get("gpus") or 0)))
        self.model = auto.from_pretrained(
            source, dtype=dtype if dtype == "auto" else getattr(torch, dtype), **kwargs
        )
        if self.cfg.get("device_map"):
            self.device = str(next(self.model.parameters()).device)
            self.model.eval()
        else:
            self.device = _device(self.opts["device"])
            self.model.to(self.device).eval()
        self.pad_id = _pad_id(self.tokenizer)
        if getattr(self.model.config, "pad_token_id", None) is None:
            self.model.config.pad_token_id = self.pad_id  # classifiers find the last token by it
        self._fingerprint = self._weights_fingerprint(source)

    def _weights_fingerprint(self, source: str) -> str:
        """sha256 of a local directory's files, or the hub repo at its resolved commit."""
        if self.cfg.get("path"):
            return self._known_fingerprint() or ""
        commit = getattr(self.model.config, "_commit_hash", None) or self.cfg.get("revision")
        return f"hub:{source}@{commit}"

    def _known_fingerprint(self) -> str | None:
        """The weights' fingerprint without loading them: a local folder's file hashes, or a hub
        repo at its pinned revision (None: unpinned, known only once loaded)."""
        if self._fingerprint is None and self.cfg.get("path"):
            files = sorted(p for p in Path(self.cfg["path"]).iterdir() if p.is_file())
            self._fingerprint = sha256_json({p.name: sha256_file(p) for p in files})
        if self._fingerprint is None and self.cfg.get("revision"):
            return f"hub:{self.cfg['repo']}@{self.cfg['revision']}"
        return self._fingerprint

    def reward_id(self) -> dict:
        """What a score depends on besides its question and solution (the cache key's part)."""
        from retrace.engine.reward_cache import SCORE_SETTINGS

        settings = {k: self.cfg[k] for k in SCORE_SETTINGS if k in self.cfg}
        pinned = f"hub:{self.cfg.get('repo')}@{self.cfg.get('revision')}"  # unpinned: "@None"
        return {"model": self._known_fingerprint() if self.cfg.get("path") else pinned, **settings}

    def identity(self) -> dict:
        known = self._known_fingerprint()
        if self.model is None and known and self.cfg.get("params"):  # every score cached: no load
            params = int(self.cfg["params"])
        else:
            self.load()
            known, params = self._fingerprint, sum(p.numel() for p in self.model.parameters())
        return {
            "name": self.name,
            "model": known,
            "model_name": self.cfg.get("repo") or self.cfg.get("path"),
            "params": params,
            "kind": self.kind,
            "aggregate": self.opts["aggregate"],
        }

    def score(self, items: Sequence[ScoreItem]) -> list[Score]:
        if not items:
            return []
        size = max(1, int(self.opts["batch_size"]))
        if self.cache is not None:
            return cached_scores(self.cache, self.reward_id(), items, self.score_batch, size)
        return [s for i in range(0, len(items), size) for s in self.score_batch(items[i : i + size])]

    def score_batch(self, batch: Sequence[ScoreItem]) -> list[Score]:
        """One forward pass's scores (the model loaded on first use)."""
        self.load()
        return self._prm(batch) if self.kind == "prm" else self._classify(batch)

    # --- prm -------------------------------------------------------------------------

    def render(self, conversation: list[dict]) -> list[int]:
        self.load()
        text = self.tokenizer.apply_chat_template(conversation, tokenize=False)
        # The template writes its own special tokens; adding BOS again would double it.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prm_inputs(self, question: str, steps: list[str]) -> tuple[list[int], list[tuple[int, int, int]]]:
        """Token ids of the whole conversation and, per step, (position, plus id, minus id).

        The position of step k's verdict token is where the ids first differ when that
        assistant turn says `minus` instead of `plus`; no template-specific offset needed.
        """

        def conversation(bad: int) -> list[dict]:
            turns = []
            for k, step in enumerate(steps):
                turns.append({"role": "user", "content": f"{question} {step}" if k == 0 else step})
                turns.append({"role": "assistant", "content": self.minus if k == bad else self.plus})
            return turns

        ids = self.render(conversation(-1))
        marks = []
        for k in range(len(steps)):
            other = self.render(conversation(k))
            at = next(i for i, (a, b) in enumerate(zip(ids, other)) if a != b)
            marks.append((at, ids[at], other[at]))
        return ids, marks

    def step_scores(self, items: Sequence[ScoreItem]) -> list[tuple[list[float], int]]:
        """Per item: P("+") of every step, and the number of tokens the forward pass read."""
        import torch

        inputs = [self.prm_inputs(it.problem.question, split_steps(it.solution)) for it in items]
        logits = self._forward([ids for ids, _ in inputs], lambda out: out.logits)
        return [
            (
                [
                    float(torch.softmax(logits[j, at - 1, [plus, minus]].float(), -1)[0])
                    for at, plus, minus in marks
                ],
                len(ids),
            )
            for j, (ids, marks) in enumerate(inputs)
        ]

    def _prm(self, items: Sequence[ScoreItem]) -> list[Score]:
        return [Score(float(self.aggregate(steps)), prompt_tokens=n) for steps, n in self.step_scores(items)]

    # --- classifier ------------------------------------------------------------------

    def _classify(self, items: Sequence[ScoreItem]) -> list[Score]:
        import torch

        batch = [
            self.render(
                [
                    {"role": "user", "content": it.problem.question},
                    {"role": "assistant", "content": it.solution},
                ]
            )
            for it in items
        ]
        values = self._forward(batch, lambda out: out.logits if hasattr(out, "logits") else out[0])
        values = values.reshape(len(batch), -1)[:, 0].float()
        if self.opts["squash"] == "sigmoid":
            values = torch.sigmoid(values)
        return [Score(float(v), prompt_tokens=len(ids)) for v, ids in zip(values, batch)]

    def _forward(self, batch: list[list[int]], pick: Any):
        """One right-padded forward pass; `pick` chooses the output tensor."""
        import torch

        width = max(len(ids) for ids in batch)
        ids = torch.tensor([x + [self.pad_id] * (width - len(x)) for x in batch], device=self.device)
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in batch], device=self.device)
        with torch.inference_mode():
            return pick(self.model(input_ids=ids, attention_mask=mask))


def own_gpus_memory(k: int) -> dict:
    """`max_memory` for from_pretrained: the last `k` visible GPUs (the reward model's own; the
    policy's engine takes the first ones), REWARD_GPU_SHARE of each; {} when k is 0 or the
    node has fewer GPUs (then accelerate places it as before)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    found = memory_map(k, [torch.cuda.get_device_properties(i).total_memory for i in range(count)])
    return {"max_memory": found} if found else {}


def memory_map(k: int, totals: list[int]) -> dict:
    """{GPU index: bytes} over the last `k` of GPUs with `totals` bytes (empty: k > len)."""
    if not k or k > len(totals):
        return {}
    return {i: int(totals[i] * REWARD_GPU_SHARE) for i in range(len(totals) - k, len(totals))}


def _pad_id(tokenizer) -> int:
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if tid is not None:
            return int(tid)
    return 0


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name
