"""The reasoner's turns, one scheduler task per question, through CachedLLM (cached by content).

A *rejection path* of a question is the sequence of turns the reasoner produces when every
earlier turn was rejected: turn t's prompt depends only on turns < t (Appendix B context),
and its request (messages + sampling + per-turn seed) is fixed by them. So

- Algorithm 1 (distillation) is a prefix of the path: stop at the first correct answer;
- DRR inference with any judge is a prefix of the path: stop at the first accepted answer,

and `loop.distil` / `loop.replay` run over a stored path without generating
again (sample once, judge many: the real DM, the shuffled-label DM, always-accept/reject).

    paths = rejection_paths(problems, llm, cfg, seed, max_turns, stop=correct_now)
    turn = paths[pid]["turns"][t]   # {"turn", "messages", "text", "answer", "rationale", "letter", ...}

Each question's path, Abstain answer and Self-Critic loop is a task of retrace.engine.scheduler
(`llm.run_tasks`): a question's next turn goes to the engine as soon as its previous turn
returned, whatever the other questions are doing, so one slow reply holds up only its own
question. A task builds each request from its own history only, so the requests (and cache
keys) are those of a turn-by-turn batched loop; the results are returned in problem order.
The block's settings the requests read (strategy, max_tokens, the Appendix B temperatures) are
read once into a frozen `Settings`; every function here takes it or the block's mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from retrace.drr import prompts
from retrace.engine.scheduler import Task, one
from retrace.methods.base import derive_seed
from retrace.util.records import Completion, Problem, Request, Sampling


@dataclass(frozen=True)
class Temperature:
    """One of the block's `sampling:` entries."""

    temperature: float
    top_p: float

    @classmethod
    def of(cls, entry: Mapping) -> Temperature:
        return cls(float(entry["temperature"]), float(entry["top_p"]))


@dataclass(frozen=True)
class Settings:
    """What the reasoner's requests read from the DRR block (config/drr/defaults.yaml under
    `drr:`, drr/settings.load), typed and read-only."""

    strategy: str  # exploration | gradual
    max_tokens: int
    exploration_first: Temperature
    exploration_later: Temperature
    gradual: Temperature
    abstain: Temperature
    selfcritic: Temperature

    @classmethod
    def of(cls, cfg: Mapping | Settings) -> Settings:
        """`cfg` itself if already read, else read from the block's mapping."""
        if isinstance(cfg, Settings):
            return cfg
        s = cfg["sampling"]
        names = ("exploration_first", "exploration_later", "gradual", "abstain", "selfcritic")
        return cls(str(cfg["strategy"]), int(cfg["max_tokens"]), *(Temperature.of(s[n]) for n in names))


def turn_sampling(cfg: Mapping | Settings, turn: int, seed: int, problem_id: str) -> Sampling:
    """Appendix B temperatures: exploration T=0.1/p=0.9 first, 0.6/0.7 later; gradual 0.6/0.9."""
    s = Settings.of(cfg)
    if s.strategy == "exploration":
        chosen = s.exploration_first if turn == 0 else s.exploration_later
    else:
        chosen = s.gradual
    return Sampling(
        temperature=chosen.temperature,
        top_p=chosen.top_p,
        max_tokens=s.max_tokens,
        seed=derive_seed(seed, problem_id, turn),
    )


def turn_record(problem: Problem, turn: int, messages, completion) -> dict:
    answer, rationale = prompts.split_reply(completion.text)
    return {
        "turn": turn,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "text": completion.text,
        "answer": answer,
        "rationale": rationale,
        "letter": prompts.reply_letter(completion.text, problem.choices or ()),
        "abstain": prompts.is_abstention(answer),
        "key": completion.key,
        "cache_hit": completion.cache_hit,
        "prompt_tokens": completion.prompt_tokens,
        "generated_tokens": completion.generated_tokens,
    }


def turn_request(
    problem: Problem, turns: Sequence[dict], cfg: Mapping | Settings, seed: int
) -> tuple[tuple, Request]:
    """(messages, request) of the problem's next turn, built from its own turns so far."""
    turn = len(turns)
    m = prompts.turn_messages(problem, turns, turn, Settings.of(cfg).strategy)
    return m, Request(
        messages=m, sampling=turn_sampling(cfg, turn, seed, problem.id), tag=f"{problem.id}#turn{turn}"
    )


def path_task(
    problem: Problem,
    cfg: Mapping | Settings,
    seed: int,
    max_turns: int,
    stop: Callable[[Problem, dict], bool] | None = None,
) -> Task:
    """One problem's rejection path as a scheduler task: turn after turn until `stop` says
    so after a turn, else `max_turns`; returns {"problem_id", "turns"}."""
    path: dict[str, Any] = {"problem_id": problem.id, "turns": []}
    for turn in range(max_turns):
        m, request = turn_request(problem, path["turns"], cfg, seed)
        rec = turn_record(problem, turn, m, (yield request))
        path["turns"].append(rec)
        if stop and stop(problem, rec):
            break
    return path


def rejection_paths(
    problems: Sequence[Problem],
    llm,
    cfg: Mapping | Settings,
    seed: int,
    max_turns: int,
    stop: Callable[[Problem, dict], bool] | None = None,
) -> dict[str, dict]:
    """{problem id: {"problem_id", "turns": [...]}}; a question stops when `stop` says so
    after a turn (distillation: its answer was right), else after `max_turns`."""
    s = Settings.of(cfg)
    paths = llm.run_tasks([path_task(p, s, seed, max_turns, stop) for p in problems])
    return {p.id: path for p, path in zip(problems, paths)}


def abstain_request(problem: Problem, cfg: Mapping | Settings, seed: int) -> tuple[tuple, Request]:
    """(messages, request) of the Abstain baseline: 'none of the above' allowed, T=0.1."""
    settings = Settings.of(cfg)
    s = settings.abstain
    m = prompts.abstain_messages(problem)
    return m, Request(
        messages=m,
        sampling=Sampling(
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=settings.max_tokens,
            seed=derive_seed(seed, problem.id, 1000),
        ),
        tag=f"{problem.id}#abstain",
    )


def abstain_task(problem: Problem, cfg: Mapping | Settings, seed: int) -> Task:
    """The problem's Abstain answer as a one-request task; returns its turn record."""
    m, request = abstain_request(problem, cfg, seed)
    return turn_record(problem, 0, m, (yield from one(request)))


def abstain_answers(problems: Sequence[Problem], llm, cfg: Mapping | Settings, seed: int) -> dict[str, dict]:
    """The Abstain baseline: one answer per question, 'none of the above' allowed (T=0.1)."""
    s = Settings.of(cfg)
    records = llm.run_tasks([abstain_task(p, s, seed) for p in problems])
    return {p.id: rec for p, rec in zip(problems, records)}


def selfcritic_request(
    problem: Problem, replies: Sequence[str], cfg: Mapping | Settings, seed: int
) -> tuple[tuple, Request]:
    """(messages, request) of step len(replies) of Huang et al.'s answer/review/improve loop, T=0."""
    settings, step = Settings.of(cfg), len(replies)
    s = settings.selfcritic
    m = prompts.selfcritic_messages(problem, replies)
    return m, Request(
        messages=m,
        sampling=Sampling(
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=settings.max_tokens,
            seed=derive_seed(seed, problem.id, 2000 + step),
        ),
        tag=f"{problem.id}#selfcritic{step}",
    )


def selfcritic_task(problem: Problem, cfg: Mapping | Settings, seed: int) -> Task:
    """One problem's Self-Critic loop as a task: answer, review, improve, each step sent as
    soon as the previous one returned; returns {"steps", "initial_letter", "letter"}."""
    replies: list[str] = []
    steps: list[dict] = []
    for step in range(3):
        m, request = selfcritic_request(problem, replies, cfg, seed)
        c = cast("Completion", (yield request))  # one request, one completion
        steps.append(
            {
                "step": step,
                "messages": [{"role": x.role, "content": x.content} for x in m],
                "text": c.text,
                "key": c.key,
                "cache_hit": c.cache_hit,
                "generated_tokens": c.generated_tokens,
            }
        )
        replies.append(c.text)
    choices = problem.choices or ()
    return {
        "steps": steps,
        "initial_letter": prompts.selfcritic_letter(replies[0], choices),
        "letter": prompts.selfcritic_letter(replies[2], choices),
    }


def selfcritic_answers(
    problems: Sequence[Problem], llm, cfg: Mapping | Settings, seed: int
) -> dict[str, dict]:
    """Self-Critic (Huang et al.): answer, review, improve, at T=0; one task per question."""
    s = Settings.of(cfg)
    results = llm.run_tasks([selfcritic_task(p, s, seed) for p in problems])
    return {p.id: r for p, r in zip(problems, results)}


def eval_generations(problems: Sequence[Problem], llm, cfg: Mapping | Settings, seed: int, max_turns: int):
    """Rejection paths (`max_turns` turns each), Abstain and Self-Critic in one `run_tasks`
    call: per problem a path task, an abstain task and a self-critic task, so each task's
    next request goes to the engine as soon as its previous one returned (no round barrier).
    The requests are exactly those of the separate functions (same cache keys).
    Returns (paths, abstain, critic), each {problem id: ...} in problem order."""
    # In this order a synchronous engine's waves are the old rounds, request for request
    # (path turn r of every question, their Abstain answers at r = 0, Self-Critic step r).
    s = Settings.of(cfg)
    tasks = (
        [path_task(p, s, seed, max_turns) for p in problems]
        + [abstain_task(p, s, seed) for p in problems]
        + [selfcritic_task(p, s, seed) for p in problems]
    )
    done, n = llm.run_tasks(tasks), len(problems)
    per_problem = lambda part: {p.id: r for p, r in zip(problems, done[part * n : (part + 1) * n])}
    return per_problem(0), per_problem(1), per_problem(2)
