"""Step-level beam search guided by a scorer (config/method/beam.yaml); lookahead.py reuses it.

A step is the text up to a blank line: each call stops at `separator` ("\\n\\n"), and the
next call continues the assistant turn from the accumulated steps (continue_final=True,
the prefix ending in the separator). Each round:
  1. expand: every active beam gets `expand` sampled next steps (the root: width × expand);
  2. look ahead (lookahead > 0 only): each open candidate is rolled out `lookahead` more
     steps greedily, as in search-and-learn (https://github.com/huggingface/search-and-learn);
  3. score: the scorer judges each candidate's text, including its look-ahead rollout;
  4. prune: the `width` best distinct candidates survive; those that ended are finished,
     the rest stay active (so the beam narrows as beams finish).
A candidate ends ("answer") when its step contains one of `done_markers`, ("eos") when its
step is empty, or ("max_steps") at the last round. Engines report EOS and a stop string
alike as "stop", so a model that ended its turn shows up as an empty next step.
Each problem's search is one task of retrace.engine.scheduler: a round's expansions, each
look-ahead depth and the judge calls are each one fan-out (a list of requests answered
together), and pruning is a barrier of that problem only. So a problem starts its next
round as soon as its own round is scored, whatever the other problems are doing, and the
engine's slots stay full. The requests (prompts, seeds, tags) are the same as if all
problems moved in lockstep; only the order in which they reach the engine changes.

Row: samples = the finished beams (text = steps joined by the separator; token counts =
the calls on the beam's own path); extra = {"scores", "valid", "chosen" (argmax), "ends",
"scorer", "steps" (every round's candidates with parent, text, look-ahead, score, end,
kept and cache keys), "compute": {"policy": every expansion and look-ahead call, counted
once per cache key; "scorer": every scoring call}}. The answer is samples[chosen].
Does not cover: chat templates that trim the final assistant message (Llama 3's `| trim`):
the trailing separator is lost, the model may re-emit it at once, and that empty step
ends the beam early.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrace.config.settings import MethodSettings
from retrace.engine.scorers import Score, ScoreItem, build_scorer
from retrace.methods.base import MethodContext, derive_seed, problem_messages, sampling, tokens_used
from retrace.methods.best_of_n import argmax
from retrace.util.records import Completion, Message, Problem, Request
from retrace.util.registry import METHODS


@dataclass(frozen=True)
class Settings:
    width: int
    expand: int
    max_steps: int
    lookahead: int
    separator: str
    markers: tuple[str, ...]
    dedupe: bool

    @classmethod
    def from_cfg(cls, cfg: MethodSettings, lookahead: int) -> Settings:
        s = cls(
            width=int(cfg["width"]),
            expand=int(cfg["expand"]),
            max_steps=int(cfg["max_steps"]),
            lookahead=lookahead,
            separator=cfg["separator"],
            markers=tuple(cfg.get("done_markers") or ("\\boxed", "Answer:")),
            dedupe=bool(cfg["dedupe"]),
        )
        if min(s.width, s.expand, s.max_steps) < 1 or not s.separator:
            # Fewer would leave a problem with no finished beam, hence no answer at all.
            raise ValueError(f"beam search needs width, expand and max_steps >= 1 and a separator: {s}")
        return s


@dataclass(frozen=True)
class Beam:
    """A partial solution: its steps, the calls that wrote them, and why it ended (if it did)."""

    steps: tuple[str, ...] = ()
    calls: tuple[Completion, ...] = ()
    end: str | None = None  # "answer" | "eos" | "max_steps"; None while open


@dataclass
class Candidate:
    beam: Beam
    parent: int
    ahead: tuple[str, ...] = ()  # look-ahead steps: scored, never kept
    ahead_calls: list = field(default_factory=list)
    ahead_end: str | None = None
    score: Score | None = None


@dataclass
class Search:
    """The search state of one problem."""

    problem: Problem
    messages: tuple[Message, ...]
    active: list[Beam] = field(default_factory=lambda: [Beam()])
    finished: list[tuple[Beam, Score]] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    policy: dict = field(default_factory=dict)  # cache key -> Completion (a call counts once)
    scorer: list[Score] = field(default_factory=list)


def continue_request(
    search: Search, steps: tuple[str, ...], sampling_, index: int, tag: str, separator: str
) -> Request:
    """The next-step request after `steps`: a continued assistant turn, or the plain prompt."""
    if not steps:
        return Request(messages=search.messages, sampling=sampling_, sample_index=index, tag=tag)
    prefix = separator.join(steps) + separator
    return Request(
        messages=search.messages + (Message("assistant", prefix),),
        sampling=sampling_,
        sample_index=index,
        continue_final=True,
        tag=tag,
    )


def step_end(text: str, s: Settings) -> str | None:
    if not text.strip():
        return "eos"
    return "answer" if any(m in text for m in s.markers) else None


def extend(beam: Beam, c: Completion, last_round: bool, s: Settings) -> Beam:
    """`beam` plus the step in `c` (an empty step adds nothing and ends the beam)."""
    end = step_end(c.text, s) or ("max_steps" if last_round else None)
    steps = beam.steps if end == "eos" else beam.steps + (c.text.strip(),)
    return Beam(steps, beam.calls + (c,), end)


def expand_requests(
    search: Search, t: int, cfg: MethodSettings, ctx: MethodContext, s: Settings
) -> list[tuple[int, Beam, Request]]:
    """Round t's (parent rank, parent, request): `expand` per active beam (root: width × expand)."""
    stop = cfg.sampling.stop + (s.separator,)
    k = s.width * s.expand if t == 0 else s.expand
    plan = []
    for rank, beam in enumerate(search.active):
        for j in range(k):
            seed = derive_seed(ctx.seed, f"{search.problem.id}:step{t}:beam{rank}", j)
            tag = f"{search.problem.id}:step{t}:beam{rank}#{j}"
            plan.append(
                (
                    rank,
                    beam,
                    continue_request(
                        search, beam.steps, sampling(cfg.sampling, seed, stop=stop), j, tag, s.separator
                    ),
                )
            )
    return plan


def expand(search: Search, t: int, cfg: MethodSettings, ctx: MethodContext, s: Settings):
    """Round t's candidates of one problem, sampled as one fan-out (a step of its task)."""
    plan = expand_requests(search, t, cfg, ctx, s)
    completions = yield [request for _, _, request in plan]
    cands = []
    for (rank, beam, _), c in zip(plan, completions):
        search.policy[c.key] = c
        cands.append(Candidate(extend(beam, c, t + 1 >= s.max_steps, s), rank))
    return cands


def look_ahead(search: Search, cands: list[Candidate], cfg: MethodSettings, s: Settings):
    """Roll every open candidate out `s.lookahead` more steps at temperature 0, one fan-out
    per depth (a step of the problem's task)."""
    stop = cfg.sampling.stop + (s.separator,)
    # Greedy, seed 0: the rollout is a function of its prefix, so equal prefixes share a key.
    greedy = sampling(cfg.sampling, 0, temperature=0.0, stop=stop)
    for depth in range(s.lookahead):
        todo = [c for c in cands if c.beam.end is None and c.ahead_end is None]
        if not todo:
            return
        requests = [
            continue_request(
                search, c.beam.steps + c.ahead, greedy, 0, f"{search.problem.id}:ahead{depth}", s.separator
            )
            for c in todo
        ]
        for c, done in zip(todo, (yield requests)):
            search.policy[done.key] = done
            c.ahead_calls.append(done)
            c.ahead_end = step_end(done.text, s)
            if c.ahead_end != "eos":
                c.ahead = c.ahead + (done.text.strip(),)


def score(search: Search, cands: list[Candidate], scorer, llm, s: Settings):
    """Score every candidate's text (with its look-ahead); open texts are judged as partial.
    A judge on `llm` is one fan-out of the task (Scorer.score_task); other scorers score here."""
    items = []
    for c in cands:
        ended = c.beam.end is not None or c.ahead_end in ("answer", "eos")
        items.append(ScoreItem(search.problem, s.separator.join(c.beam.steps + c.ahead), partial=not ended))
    for c, result in zip(cands, (yield from scorer.score_task(items, llm))):
        c.score = result
        search.scorer.append(result)


def prune(search: Search, cands: list[Candidate], t: int, s: Settings) -> None:
    """Keep the `width` best distinct candidates (ties: generation order); log them all."""
    scores = [_scored(c) for c in cands]
    order = sorted(range(len(cands)), key=lambda i: (-scores[i].value, i))
    kept: list[int] = []
    seen: set[tuple[str, ...]] = set()
    for i in order:
        if len(kept) == s.width:
            break
        if s.dedupe and cands[i].beam.steps in seen:
            continue
        seen.add(cands[i].beam.steps)
        kept.append(i)
    search.active = [cands[i].beam for i in kept if cands[i].beam.end is None]
    search.finished += [(cands[i].beam, scores[i]) for i in kept if cands[i].beam.end]
    search.log.append(
        {"step": t, "candidates": [candidate_record(c, i in kept, s) for i, c in enumerate(cands)]}
    )


def _scored(c: Candidate) -> Score:
    """The score of a candidate that score() has seen."""
    if c.score is None:
        raise AssertionError(f"candidate {c.beam.steps[-1:]} was never scored")
    return c.score


def candidate_record(c: Candidate, kept: bool, s: Settings) -> dict:
    score = _scored(c)
    return {
        "parent": c.parent,
        "text": c.beam.steps[-1] if c.beam.end != "eos" and c.beam.steps else "",
        "lookahead": s.separator.join(c.ahead),
        "score": score.value,
        "valid": score.valid,
        "end": c.beam.end,
        "kept": kept,
        "key": c.beam.calls[-1].key,
        "lookahead_keys": [a.key for a in c.ahead_calls],
        "score_key": score.key,
    }


def beam_sample(index: int, beam: Beam, s: Settings) -> dict:
    """A finished beam in the stored sample format (token counts: its own path's calls)."""
    calls = beam.calls
    return {
        "index": index,
        "text": s.separator.join(beam.steps),
        "finish_reason": calls[-1].finish_reason,
        "end": beam.end,
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "cached_prompt_tokens": sum(c.cached_prompt_tokens for c in calls),
        "generated_tokens": sum(c.generated_tokens for c in calls),
        "cache_hit": all(c.cache_hit for c in calls),
        "key": calls[-1].key,
        "step_keys": [c.key for c in calls],
    }


def search_row(search: Search, method: str, s: Settings, identity: dict) -> dict:
    values = [score_.value for _, score_ in search.finished]
    return {
        "problem_id": search.problem.id,
        "method": method,
        "samples": [beam_sample(i, b, s) for i, (b, _) in enumerate(search.finished)],
        "extra": {
            "scores": values,
            "valid": [sc.valid for _, sc in search.finished],
            "chosen": argmax(values),
            "ends": [b.end for b, _ in search.finished],
            "scorer": identity,
            "width": s.width,
            "expand": s.expand,
            "lookahead": s.lookahead,
            "steps": search.log,
            "compute": {
                "policy": tokens_used(list(search.policy.values())),
                "scorer": tokens_used(search.scorer),
            },
        },
    }


def search_task(search: Search, cfg: MethodSettings, llm, ctx: MethodContext, s: Settings, scorer):
    """One problem's whole search as a scheduler task: per round, expand, look ahead, score
    (fan-outs) and prune; it ends when no beam is open or after `max_steps` rounds."""
    for t in range(s.max_steps):
        if not search.active:
            return
        cands = yield from expand(search, t, cfg, ctx, s)
        if s.lookahead:
            yield from look_ahead(search, cands, cfg, s)
        yield from score(search, cands, scorer, llm, s)
        prune(search, cands, t, s)


def run_search(
    problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext, method: str, lookahead: int
) -> list[dict]:
    """Beam search (lookahead = 0) or lookahead search, one scheduler task per problem."""
    s = Settings.from_cfg(cfg, lookahead)
    scorer = build_scorer(cfg, llm, ctx)
    searches = [Search(p, problem_messages(p, ctx)) for p in problems]
    llm.run_tasks([search_task(x, cfg, llm, ctx, s, scorer) for x in searches], unit="problems")
    identity = scorer.identity() if problems else {}
    return [search_row(x, method, s, identity) for x in searches]


@METHODS.register("beam")
def run(problems: list[Problem], cfg: MethodSettings, llm, ctx: MethodContext) -> list[dict]:
    return run_search(problems, cfg, llm, ctx, method="beam", lookahead=0)


def _calls_per_problem(cfg: dict, lookahead: int = 0) -> int:
    """Upper bound for retrace.planning.estimate: every round expands every beam and scores each
    candidate, after a rollout `lookahead` steps on (0 here, as `run` searches; lookahead.py
    passes its YAML's `lookahead`)."""
    candidates = int(cfg["width"]) * int(cfg["expand"]) * int(cfg["max_steps"])
    return candidates * (2 + lookahead)


run.calls_per_problem = _calls_per_problem
