"""Scorers: a number for "how likely is this (partial) solution correct", for RM@N and search.

    from retrace.engine.scorers import ScoreItem, build_scorer
    scorer = build_scorer(method_cfg, llm, ctx)            # method_cfg["scorer"]["name"] picks one
    scores = scorer.score([ScoreItem(problem, text, partial=False), ...])   # list[Score]
    scorer.identity()   # {"name", "model", ...}: stored beside every score it produced
    scores = yield from scorer.score_task(items, llm)       # the same, inside a scheduler task

Implementations, chosen by name (no registry: there are two, and one is GPU-only):
- `llm_judge` (here): asks a chat model "is this solution correct? Yes or No" through the
  job's CachedLLM (so judge calls are cached and counted) and reads P(Yes) from the
  logprobs of the first answer token: p(yes) / (p(yes) + p(no)), summing the top-k
  alternatives whose stripped, lower-cased text is in the `yes` / `no` lists (" Yes",
  "Yes" and "yes" are all one vote). Runs on CPU with the embedded models.
- `hf_reward` (engine/hf_reward.py): a reward model or process reward model from the hub
  through transformers, loaded in-process; for GPU runs.

Inside a task of retrace.engine.scheduler (beam search), `score_task` is the same scoring as one
step of the task: a judge on the task's own `llm` yields its requests as one fan-out, so the
judge calls of one problem run beside the other problems' work; any other scorer (hf_reward,
or a judge on another model's engine) scores at once, holding the scheduler meanwhile.

A scorer never raises on what a model wrote: output that carries no yes/no signal gets
the configured `fallback` score and `valid=False`. Engine failures do raise.
A judge on another model than the policy: set `scorer.model`; the generate stage then loads
that model (its manifest is an input of the job) and passes it as `ctx.scorer_llm`.
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrace.config.settings import judge_settings
from retrace.util.hashing import sha256_file
from retrace.util.records import Completion, Message, Problem, Request, Sampling, TokenLogprob
from retrace.util.templates import render, template_path

IMPLEMENTATIONS = {
    "llm_judge": "retrace.engine.scorers:LLMJudge",
    "hf_reward": "retrace.engine.hf_reward:HFReward",
}


@dataclass(frozen=True)
class ScoreItem:
    """One thing to score: a problem and a solution text; `partial` = steps so far only."""

    problem: Problem
    solution: str
    partial: bool = False


@dataclass(frozen=True)
class Score:
    """A score in [0, 1] (higher = more likely correct) and what producing it cost.

    `valid` is False when the scorer's output gave no signal and `value` is the fallback.
    `key` is the request-cache key of the judge call ("" for scorers outside the cache).
    """

    value: float
    valid: bool = True
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generated_tokens: int = 0
    key: str = ""


class Scorer(ABC):
    name = "base"

    @abstractmethod
    def score(self, items: Sequence[ScoreItem]) -> list[Score]:
        """Scores of `items`, in order; batched so an engine sees them together."""

    @abstractmethod
    def identity(self) -> dict:
        """What produced the scores: at least `name`, `model` (a fingerprint) and `params`."""

    def score_task(self, items: Sequence[ScoreItem], llm: Any):
        """`score(items)` as a step of a scheduler task running on `llm` (a generator that
        returns the scores). This default asks the task's engine for nothing."""
        yield from ()
        return self.score(items)


def build_scorer(method_cfg: Mapping[str, Any], llm: Any, ctx: Any = None) -> Scorer:
    """The scorer named in `method_cfg["scorer"]`, bound to its engine.

    llm_judge with `model: null` judges with the job's own `llm`; with a model name it
    needs that model's engine as `ctx.scorer_llm`. hf_reward loads its own model.
    """
    cfg = dict(method_cfg["scorer"])
    name = cfg["name"]
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(IMPLEMENTATIONS))}")
    module, cls_name = IMPLEMENTATIONS[name].split(":")
    cls = getattr(importlib.import_module(module), cls_name)  # lazy: hf_reward pulls in torch
    if name == "hf_reward":  # its scores in the job's request cache (retrace.engine.reward_cache)
        return cls(cfg, getattr(llm, "cache", None))
    templates = method_cfg.get("templates") or {}
    source = getattr(method_cfg, "source", "the method's config")  # MethodSettings name their file
    return cls(cfg, templates.get("judge", "judge_correct.j2"), judge_llm(cfg, llm, ctx), source)


def judge_llm(cfg: dict, llm: Any, ctx: Any) -> Any:
    """The engine the judge runs on: the job's, or `ctx.scorer_llm` for another model."""
    wanted = cfg.get("model")
    if wanted is None:
        return llm
    other = getattr(ctx, "scorer_llm", None)
    if other is None:
        raise ValueError(
            f"scorer model {wanted!r} differs from the job's model, but no engine "
            "for it was passed (MethodContext.scorer_llm); use model: null"
        )
    if other.model.get("name") != wanted:
        raise ValueError(f"scorer model {wanted!r} but ctx.scorer_llm runs {other.model.get('name')!r}")
    return other


def normalise(token: str) -> str:
    return token.strip().lower()


def yes_probability(token: TokenLogprob, yes: set[str], no: set[str]) -> float | None:
    """p(yes) / (p(yes) + p(no)) at one token position, or None if neither appears.

    Alternatives are the token's top-k plus the chosen token itself; NaN logprobs are
    ignored. Tokens that only start with "yes" ("Yesterday") do not count.
    """
    options = dict(token.top)
    options.setdefault(token.token, token.logprob)
    mass = {"yes": 0.0, "no": 0.0}
    for text, logprob in options.items():
        word = normalise(str(text))
        if logprob != logprob or word not in yes | no:  # NaN never equals itself
            continue
        mass["yes" if word in yes else "no"] += math.exp(logprob)
    total = mass["yes"] + mass["no"]
    return mass["yes"] / total if total > 0 else None


class LLMJudge(Scorer):
    """P("correct") from a yes/no question to a chat model; see the module docstring."""

    name = "llm_judge"

    def __init__(self, cfg: Mapping[str, Any], template: str, llm: Any, source: str = "method.scorer"):
        """`cfg`: the method's `scorer:` block, checked and typed here (retrace.config.settings;
        `source` names its file in an error)."""
        s = judge_settings(cfg, source)
        self.llm, self.template = llm, template
        self.top, self.max_tokens = s.top_logprobs, s.max_tokens
        self.yes = {normalise(w) for w in s.yes_words}
        self.no = {normalise(w) for w in s.no_words}
        self.fallback = float(s.fallback)
        template_path(template)  # fail now, not after the rollouts, if the file is missing

    def request(self, item: ScoreItem) -> Request:
        p = item.problem
        choices = list(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", p.choices)) if p.choices else None
        text = render(
            self.template, question=p.question, choices=choices, solution=item.solution, partial=item.partial
        )
        # Greedy with a fixed seed: the judgement of a text is a function of the text.
        sampling = Sampling(temperature=0.0, max_tokens=self.max_tokens, seed=0, logprobs=self.top)
        return Request(messages=(Message("user", text),), sampling=sampling, tag=f"judge:{p.id}")

    def read(self, c: Completion) -> tuple[float, bool]:
        """(score, valid) from one judge completion: logprobs first, then the bare text."""
        for token in c.logprobs or ():
            p = yes_probability(token, self.yes, self.no)
            if p is not None:
                return p, True
        words = c.text.split()
        first = normalise(words[0].strip(".,:;!*")) if words else ""
        if first in self.yes | self.no:
            return (1.0 if first in self.yes else 0.0), True
        return self.fallback, False

    def score(self, items: Sequence[ScoreItem]) -> list[Score]:
        completions = self.llm.generate([self.request(i) for i in items]) if items else []
        return [self.judged(c) for c in completions]

    def score_task(self, items: Sequence[ScoreItem], llm: Any):
        """The judge requests as one fan-out of the task, when the judge runs on its `llm`
        (the scheduler drives one engine; another model's is called directly)."""
        if llm is not self.llm:
            return (yield from super().score_task(items, llm))
        completions = yield [self.request(i) for i in items]
        return [self.judged(c) for c in completions]

    def judged(self, c: Completion) -> Score:
        """The Score of one judge completion, with what it cost."""
        value, valid = self.read(c)
        return Score(value, valid, c.prompt_tokens, c.cached_prompt_tokens, c.generated_tokens, c.key)

    def identity(self) -> dict:
        model = self.llm.model
        return {
            "name": self.name,
            "model": model["fingerprint"],
            "model_name": model.get("name"),
            "params": model.get("params"),
            "engine": self.llm.identity,
            "template": self.template,
            "template_sha256": sha256_file(template_path(self.template)),
            "top_logprobs": self.top,
            "fallback": self.fallback,
        }
