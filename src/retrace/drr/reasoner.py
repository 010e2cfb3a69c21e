"""The reasoner's turns, batched across questions, through CachedLLM (cached by content).

A *rejection path* of a question is the sequence of turns the reasoner produces when every
earlier turn was rejected: turn t's prompt depends only on turns < t (Appendix B context),
and its request (messages + sampling + per-turn seed) is fixed by them. So

- Algorithm 1 (distillation) is a prefix of the path: stop at the first correct answer;
- DRR inference with any judge is a prefix of the path: stop at the first accepted answer,

and `discriminator.loop.distil` / `loop.replay` run over a stored path without generating
again (sample once, judge many: the real DM, the shuffled-label DM, always-accept/reject).

    paths = rejection_paths(problems, llm, cfg, seed, max_turns, stop=correct_now)
    turn = paths[pid]["turns"][t]   # {"turn", "messages", "text", "answer", "rationale", "letter", ...}
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from retrace.drr import prompts
from retrace.methods.base import derive_seed
from retrace.records import Problem, Request, Sampling


def turn_sampling(cfg: Mapping, turn: int, seed: int, problem_id: str) -> Sampling:
    """Appendix B temperatures: exploration T=0.1/p=0.9 first, 0.6/0.7 later; gradual 0.6/0.9."""
    s = cfg["sampling"]
    if cfg["strategy"] == "exploration":
        chosen = s["exploration_first"] if turn == 0 else s["exploration_later"]
    else:
        chosen = s["gradual"]
    return Sampling(temperature=float(chosen["temperature"]), top_p=float(chosen["top_p"]),
                    max_tokens=int(cfg["max_tokens"]), seed=derive_seed(seed, problem_id, turn))


def turn_record(problem: Problem, turn: int, messages, completion) -> dict:
    answer, rationale = prompts.split_reply(completion.text)
    return {"turn": turn, "messages": [{"role": m.role, "content": m.content} for m in messages],
            "text": completion.text, "answer": answer, "rationale": rationale,
            "letter": prompts.answer_letter(answer, problem.choices or ()),
            "abstain": prompts.is_abstention(answer), "key": completion.key,
            "cache_hit": completion.cache_hit, "prompt_tokens": completion.prompt_tokens,
            "generated_tokens": completion.generated_tokens}


def path_requests(problems: Sequence[Problem], paths: Mapping, cfg: Mapping, seed: int,
                  turn: int) -> list[tuple[Problem, tuple, Request]]:
    """(problem, messages, request) of turn `turn` for each problem, given its turns so far."""
    out = []
    for p in problems:
        m = prompts.turn_messages(p, paths[p.id]["turns"], turn, cfg["strategy"])
        out.append((p, m, Request(messages=m, sampling=turn_sampling(cfg, turn, seed, p.id),
                                  tag=f"{p.id}#turn{turn}")))
    return out


def rejection_paths(problems: Sequence[Problem], llm, cfg: Mapping, seed: int, max_turns: int,
                    stop: Callable[[Problem, dict], bool] | None = None) -> dict[str, dict]:
    """{problem id: {"problem_id", "turns": [...]}}; a question leaves the batch when `stop`
    says so after a turn (distillation: its answer was right), else after `max_turns`."""
    paths = {p.id: {"problem_id": p.id, "turns": []} for p in problems}
    active = list(problems)
    for turn in range(max_turns):
        if not active:
            break
        batch = path_requests(active, paths, cfg, seed, turn)
        done = llm.generate([r for _, _, r in batch])
        active = _extend(paths, batch, done, turn, stop)
    return paths


def _extend(paths, batch, done, turn, stop=None) -> list[Problem]:
    still = []
    for (p, m, _), c in zip(batch, done):
        rec = turn_record(p, turn, m, c)
        paths[p.id]["turns"].append(rec)
        if not (stop and stop(p, rec)):
            still.append(p)
    return still


def abstain_requests(problems: Sequence[Problem], cfg: Mapping, seed: int) -> list:
    s = cfg["sampling"]["abstain"]
    out = []
    for p in problems:
        m = prompts.abstain_messages(p)
        out.append((p, m, Request(messages=m, sampling=Sampling(
            temperature=float(s["temperature"]), top_p=float(s["top_p"]),
            max_tokens=int(cfg["max_tokens"]), seed=derive_seed(seed, p.id, 1000)),
            tag=f"{p.id}#abstain")))
    return out


def abstain_answers(problems: Sequence[Problem], llm, cfg: Mapping, seed: int) -> dict[str, dict]:
    """The Abstain baseline: one answer per question, 'none of the above' allowed (T=0.1)."""
    batch = abstain_requests(problems, cfg, seed)
    return {p.id: turn_record(p, 0, m, c) for (p, m, _), c in zip(batch, llm.generate([r for *_, r in batch]))}


def selfcritic_requests(problems: Sequence[Problem], replies: Mapping, cfg: Mapping, seed: int) -> list:
    """Step len(replies[id]) of Huang et al.'s answer/review/improve loop, at T=0."""
    s = cfg["sampling"]["selfcritic"]
    out = []
    for p in problems:
        step = len(replies[p.id])
        m = prompts.selfcritic_messages(p, replies[p.id])
        out.append((p, m, Request(messages=m, sampling=Sampling(
            temperature=float(s["temperature"]), top_p=float(s["top_p"]),
            max_tokens=int(cfg["max_tokens"]), seed=derive_seed(seed, p.id, 2000 + step)),
            tag=f"{p.id}#selfcritic{step}")))
    return out


def _critic_step(batch, done, replies, steps) -> None:
    for (p, m, _), c in zip(batch, done):
        steps[p.id].append({"step": len(replies[p.id]), "messages": [{"role": x.role, "content": x.content} for x in m],
                            "text": c.text, "key": c.key, "cache_hit": c.cache_hit,
                            "generated_tokens": c.generated_tokens})
        replies[p.id].append(c.text)


def _critic_result(problems, replies, steps) -> dict[str, dict]:
    return {p.id: {"steps": steps[p.id],
                   "initial_letter": prompts.selfcritic_letter(replies[p.id][0], p.choices or ()),
                   "letter": prompts.selfcritic_letter(replies[p.id][2], p.choices or ())}
            for p in problems}


def selfcritic_answers(problems: Sequence[Problem], llm, cfg: Mapping, seed: int) -> dict[str, dict]:
    """Self-Critic (Huang et al.): answer, review, improve, at T=0; three batched rounds."""
    replies: dict[str, list[str]] = {p.id: [] for p in problems}
    steps: dict[str, list[dict]] = {p.id: [] for p in problems}
    for _ in range(3):
        batch = selfcritic_requests(problems, replies, cfg, seed)
        _critic_step(batch, llm.generate([r for *_, r in batch]), replies, steps)
    return _critic_result(problems, replies, steps)


def eval_generations(problems: Sequence[Problem], llm, cfg: Mapping, seed: int, max_turns: int):
    """Rejection paths, Abstain and Self-Critic with their rounds sent together (round r: path
    turn r, Abstain if r = 0, Self-Critic step r if r < 3), so the engine's slots stay busy.
    The requests are exactly those of the separate functions (same cache keys)."""
    paths = {p.id: {"problem_id": p.id, "turns": []} for p in problems}
    replies: dict[str, list[str]] = {p.id: [] for p in problems}
    steps: dict[str, list[dict]] = {p.id: [] for p in problems}
    abstain: dict[str, dict] = {}
    for r in range(max(max_turns, 3)):
        parts = {"path": path_requests(problems, paths, cfg, seed, r) if r < max_turns else [],
                 "abstain": abstain_requests(problems, cfg, seed) if r == 0 else [],
                 "critic": selfcritic_requests(problems, replies, cfg, seed) if r < 3 else []}
        done = iter(llm.generate([req for part in parts.values() for *_, req in part]))
        got = {k: [next(done) for _ in v] for k, v in parts.items()}
        _extend(paths, parts["path"], got["path"], r)
        abstain.update({p.id: turn_record(p, 0, m, c) for (p, m, _), c in zip(parts["abstain"], got["abstain"])})
        if parts["critic"]:
            _critic_step(parts["critic"], got["critic"], replies, steps)
    return paths, abstain, _critic_result(problems, replies, steps)
