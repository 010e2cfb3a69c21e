"""Breadth-depth refinement ("Refining over Resampling", arXiv:2608.05643): N rollouts, each
refined for D rounds of continue -> critique -> correct by the same model; the vote over the
terminal traces happens in scoring, exactly as for Maj@N (config/method/refine.yaml).

How it runs:
- Depth 0 is THE Maj@N sample set: `sample_requests` with the config's `sampling` block, so
  after a `majority` run with the same seed and N it costs no engine call at all.
- Each rollout is one task of retrace.engine.scheduler: its next call (continue, critique,
  correct of the next round) goes to the engine as soon as its previous one returns, so
  the engine's slots stay full across turns and problems (no turn barrier).
- What each round is conditioned on (`history`):
    full    (the default) the rollout's whole conversation: every call sends the previous
            call's messages plus its answer plus the new role prompt, append-only across
            rounds, so the engine's prefix cache reuses the shared prefix;
    latest  the paper's description ("the generator extends or rewrites the previous trace
            ... the corrector revises the trace conditioned on both", the review,
            pith_extraction.key_machinery): each round starts again from the question and
            the previous depth's trace (as the assistant's answer), then appends its own
            continue, critique and correct. The context stays one round long whatever D is.
  Depth 1 starts from the question and the sample under both, so its requests are shared.
  Within a round the history is append-only and always holds what the model actually said.
- Critic variants are configuration (`critic`):
    model   the critique is a model call (3 calls per round);
    affirm  the critique turn holds the fixed text of templates.affirm (no model call);
    none    no critique turn at all: continue -> correct (the paper's Table 2 ablation);
    random  the critique turn holds `random_critic_words` words drawn with replacement from
            templates.random_critic by random.Random(seed of that critique call): content-free
            text of critique length, reproducible per (run seed, problem, rollout, depth).
            By default (null) as many words as a critique may have: 0.75 words per token of the
            critique role's max_tokens (OpenAI's rule of thumb, "100 tokens ~= 75 words",
            https://help.openai.com/en/articles/4936856), so the falsifier's turn is as long
            as the model critic's budget, not a fixed 60 words.
  Request seeds depend on (run seed, problem, rollout, depth, role) but not on the critic,
  so the first continue call of every variant is one shared cached request.

The trace at depth d (what is voted on) is the corrected text of round d; depth 0 is the
original sample. With `carry_forward` (off by default), a round whose corrected text yields no
answer under the task's extractor falls back to its continue text, then to the trace of
depth d-1: a correction that forgets to state an answer is a formatting failure, not a
vote for "no answer". `source` in each depth record says which text was used.

Row: "samples" = one record per rollout with the terminal trace as `text` and the
rollout's tokens summed over all its calls (so scoring's FLOPs are the whole refinement);
"extra" = {"critic", "n", "depth", "depths": [depth][rollout] records with cumulative
token counts and `context_tokens` (the history's length after the depth's last call), "roles":
per-role token totals of the problem; "history": "latest" where it is (absent: full)}.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from retrace.config.settings import MethodSettings
from retrace.methods.base import MethodContext, derive_seed, row, sample_requests, sampling
from retrace.util.records import Completion, Message, Problem, Request
from retrace.util.registry import METHODS
from retrace.util.templates import render

CRITICS = ("model", "affirm", "none", "random")
HISTORIES = ("full", "latest")
COUNTS = ("prompt_tokens", "cached_prompt_tokens", "generated_tokens")


@dataclass
class Rollout:
    """One rollout being refined: its append-only history, current trace and accounting."""

    problem: Problem
    index: int
    history: tuple[Message, ...]
    question: tuple[Message, ...]  # the depth-0 request's messages (where `latest` restarts)
    trace: str
    calls: list[Completion] = field(default_factory=list)
    depths: list[dict] = field(default_factory=list)
    roles: dict = field(default_factory=dict)
    round: dict = field(default_factory=dict)  # role -> text of the round in progress

    def say(self, prompt: str, role: str, text: str, completion: Completion | None) -> None:
        """Append a user prompt and the assistant's answer; account for the call if any."""
        self.history += (Message("user", prompt), Message("assistant", text))
        self.round[role] = text
        if completion is not None:
            self.calls.append(completion)
            totals = self.roles.setdefault(role, dict.fromkeys(COUNTS, 0))
            for k in COUNTS:
                totals[k] += getattr(completion, k)
            self.round[role + "_key"] = completion.key

    def totals(self) -> dict:
        return {k: sum(getattr(c, k) for c in self.calls) for k in COUNTS}


def check_config(cfg: MethodSettings) -> None:
    if cfg["critic"] not in CRITICS:
        raise ValueError(f"method refine: unknown critic {cfg['critic']!r}; valid: {', '.join(CRITICS)}")
    if cfg["history"] not in HISTORIES:
        raise ValueError(f"method refine: unknown history {cfg['history']!r}; valid: {', '.join(HISTORIES)}")
    if int(cfg["depth"]) < 0 or int(cfg["n"]) < 1:
        raise ValueError(f"method refine: need n >= 1 and depth >= 0, got n={cfg['n']} depth={cfg['depth']}")


def has_answer(text: str, problem: Problem, ctx: MethodContext) -> bool:
    try:
        return ctx.task.extract_answer(text, problem) is not None
    except Exception:
        return False


def start(problem: Problem, request: Request, c: Completion) -> Rollout:
    """A rollout at depth 0: the Maj@N sample and its history."""
    r = Rollout(
        problem,
        request.sample_index,
        request.messages + (Message("assistant", c.text),),
        request.messages,
        c.text,
        calls=[c],
        roles={"sample": {k: getattr(c, k) for k in COUNTS}},
    )
    r.depths.append(
        {
            "text": c.text,
            "source": "sample",
            "keys": {"sample": c.key},
            **r.totals(),
            "context_tokens": context_tokens(r),
        }
    )
    return r


def context_tokens(r: Rollout) -> int:
    """Length of the rollout's history after its last model call: with append-only histories
    every call's prompt is a prefix of it, so it is what ideal prefix reuse computes
    (retrace.scoring.compute.structural_usage)."""
    last = r.calls[-1]
    return int(last.prompt_tokens) + int(last.generated_tokens)


def role_request(
    r: Rollout, prompt: str, role: str, depth: int, cfg: MethodSettings, ctx: MethodContext
) -> Request:
    seed = derive_seed(ctx.seed, f"{r.problem.id}|refine|d{depth}|{role}", r.index)
    changes = {k: v for k, v in (cfg.get("roles") or {}).get(role, {}).items() if v is not None}
    return Request(
        messages=r.history + (Message("user", prompt),),
        sampling=sampling(cfg.sampling, seed, **changes),
        sample_index=r.index,
        tag=f"{r.problem.id}#{r.index}/d{depth}/{role}",
    )


def turn(r: Rollout, role: str, prompt: str, depth: int, cfg: MethodSettings, ctx: MethodContext):
    """One model call of `role` for rollout `r` (a step of its task); the answer joins its history."""
    c = yield role_request(r, prompt, role, depth, cfg, ctx)
    r.say(prompt, role, c.text, c)


def random_critique(r: Rollout, depth: int, cfg: MethodSettings, ctx: MethodContext) -> str:
    words = render(cfg["templates"]["random_critic"]).split()
    rng = random.Random(derive_seed(ctx.seed, f"{r.problem.id}|refine|d{depth}|critique", r.index))
    return " ".join(rng.choices(words, k=random_critic_words(cfg)))


def random_critic_words(cfg: Mapping) -> int:
    """Words of a random critique: the configured count, else critique length (see module docstring)."""
    if cfg.get("random_critic_words") is not None:
        return int(cfg["random_critic_words"])
    budget = ((cfg.get("roles") or {}).get("critique") or {}).get("max_tokens") or cfg["sampling"][
        "max_tokens"
    ]
    return max(1, round(0.75 * int(budget)))


def critique(r: Rollout, depth: int, cfg: MethodSettings, ctx: MethodContext):
    """The critique turn of one round, as the configured critic makes it."""
    critic, prompt = cfg["critic"], render(cfg["templates"]["critique"])
    if critic == "model":
        yield from turn(r, "critique", prompt, depth, cfg, ctx)
    elif critic == "affirm":
        r.say(prompt, "critique", render(cfg["templates"]["affirm"]), None)
    elif critic == "random":
        r.say(prompt, "critique", random_critique(r, depth, cfg, ctx), None)


def close_round(r: Rollout, cfg: MethodSettings, ctx: MethodContext) -> None:
    """Pick the depth's trace (see module docstring) and store the depth record."""
    trace, source = r.round["correct"], "correct"
    if cfg["carry_forward"] and not has_answer(trace, r.problem, ctx):
        if has_answer(r.round["continue"], r.problem, ctx):
            trace, source = r.round["continue"], "continue"
        else:
            trace, source = r.trace, "previous"
    r.trace = trace
    keys = {k[:-4]: v for k, v in r.round.items() if k.endswith("_key")}
    texts = {k: v for k, v in r.round.items() if not k.endswith("_key")}
    r.depths.append(
        {
            "text": trace,
            "source": source,
            **texts,
            "keys": keys,
            **r.totals(),
            "context_tokens": context_tokens(r),
        }
    )
    r.round = {}


def round_start(r: Rollout, cfg: MethodSettings) -> tuple[Message, ...]:
    """The history a round starts from (module docstring, `history`)."""
    if cfg["history"] == "latest":
        return r.question + (Message("assistant", r.trace),)
    return r.history


def refine_round(r: Rollout, depth: int, cfg: MethodSettings, ctx: MethodContext):
    """Round `depth` (1..D) of one rollout: continue, critique, correct."""
    r.history = round_start(r, cfg)
    yield from turn(r, "continue", render(cfg["templates"]["continue"]), depth, cfg, ctx)
    yield from critique(r, depth, cfg, ctx)
    correct = render(cfg["templates"]["correct"], has_critique=cfg["critic"] != "none")
    yield from turn(r, "correct", correct, depth, cfg, ctx)
    close_round(r, cfg, ctx)


def rollout_task(problem: Problem, request: Request, cfg: MethodSettings, ctx: MethodContext):
    """One rollout from its depth-0 sample through D rounds; returns the Rollout.

    Each rollout is its own task (retrace.engine.scheduler): its next call is sent as soon as its
    previous one returns, whatever the other rollouts are doing."""
    r = start(problem, request, (yield request))
    for depth in range(1, int(cfg["depth"]) + 1):
        yield from refine_round(r, depth, cfg, ctx)
    return r


def terminal(r: Rollout) -> Completion:
    """The rollout as one sample record: terminal trace, tokens of all its calls."""
    last = r.calls[-1]
    return replace(
        last,
        text=r.trace,
        logprobs=None,
        **r.totals(),
        latency_s=sum(c.latency_s for c in r.calls),
        cache_hit=all(c.cache_hit for c in r.calls),
    )


def problem_row(problem: Problem, rollouts: list[Rollout], cfg: MethodSettings) -> dict:
    roles: dict = {}
    for r in rollouts:
        for role, counts in r.roles.items():
            into = roles.setdefault(role, dict.fromkeys(COUNTS, 0))
            for k in COUNTS:
                into[k] += counts[k]
    depths = [[r.depths[d] for r in rollouts] for d in range(int(cfg["depth"]) + 1)]
    extra = {
        "critic": cfg["critic"],
        "n": len(rollouts),
        "depth": int(cfg["depth"]),
        "depths": depths,
        "roles": roles,
    }
    if cfg["history"] != "full":  # full-history rows stay as they were before `history` came
        extra["history"] = cfg["history"]
    return row(problem, "refine", [terminal(r) for r in rollouts], extra)


@METHODS.register("refine")
def run(problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext) -> list[dict]:
    check_config(cfg)
    n = int(cfg["n"])
    tasks = [rollout_task(p, q, cfg, ctx) for p in problems for q in sample_requests(p, cfg.sampling, ctx, n)]
    rollouts = llm.run_tasks(tasks)
    return [problem_row(p, rollouts[i * n : (i + 1) * n], cfg) for i, p in enumerate(problems)]


def _calls_per_problem(cfg: dict) -> int:
    """Model calls per problem (for retrace.planning.estimate): N samples + N × D rounds of 2-3 calls."""
    per_round = 3 if cfg["critic"] == "model" else 2  # affirm/random critiques are not model calls
    return int(cfg["n"]) * (1 + int(cfg["depth"]) * per_round)


run.calls_per_problem = _calls_per_problem
