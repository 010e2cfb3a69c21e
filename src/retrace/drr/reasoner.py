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


def rejection_paths(problems: Sequence[Problem], llm, cfg: Mapping, seed: int, max_turns: int,
                    stop: Callable[[Problem, dict], bool] | None = None) -> dict[str, dict]:
    """{problem id: {"problem_id", "turns": [...]}}; a question leaves the batch when `stop`
    says so after a turn (distillation: its answer was right), else after `max_turns`."""
    paths = {p.id: {"problem_id": p.id, "turns": []} for p in problems}
    active = list(problems)
    for turn in range(max_turns):
        if not active:
            break
        reqs, msgs = [], []
        for p in active:
            m = prompts.turn_messages(p, paths[p.id]["turns"], turn, cfg["strategy"])
            msgs.append(m)
            reqs.append(Request(messages=m, sampling=turn_sampling(cfg, turn, seed, p.id),
                                tag=f"{p.id}#turn{turn}"))
        done = llm.generate(reqs)
        still = []
        for p, m, c in zip(active, msgs, done):
            rec = turn_record(p, turn, m, c)
            paths[p.id]["turns"].append(rec)
            if not (stop and stop(p, rec)):
                still.append(p)
        active = still
    return paths


def abstain_answers(problems: Sequence[Problem], llm, cfg: Mapping, seed: int) -> dict[str, dict]:
    """The Abstain baseline: one answer per question, 'none of the above' allowed (T=0.1)."""
    s = cfg["sampling"]["abstain"]
    reqs, msgs = [], []
    for p in problems:
        m = prompts.abstain_messages(p)
        msgs.append(m)
        reqs.append(Request(messages=m, sampling=Sampling(
            temperature=float(s["temperature"]), top_p=float(s["top_p"]),
            max_tokens=int(cfg["max_tokens"]), seed=derive_seed(seed, p.id, 1000)),
            tag=f"{p.id}#abstain"))
    return {p.id: turn_record(p, 0, m, c) for p, m, c in zip(problems, msgs, llm.generate(reqs))}


def selfcritic_answers(problems: Sequence[Problem], llm, cfg: Mapping, seed: int) -> dict[str, dict]:
    """Self-Critic (Huang et al.): answer, review, improve, at T=0; three batched rounds."""
    s = cfg["sampling"]["selfcritic"]
    replies: dict[str, list[str]] = {p.id: [] for p in problems}
    steps: dict[str, list[dict]] = {p.id: [] for p in problems}
    for step in range(3):
        msgs = [prompts.selfcritic_messages(p, replies[p.id]) for p in problems]
        reqs = [Request(messages=m, sampling=Sampling(
            temperature=float(s["temperature"]), top_p=float(s["top_p"]),
            max_tokens=int(cfg["max_tokens"]), seed=derive_seed(seed, p.id, 2000 + step)),
            tag=f"{p.id}#selfcritic{step}") for p, m in zip(problems, msgs)]
        for p, m, c in zip(problems, msgs, llm.generate(reqs)):
            replies[p.id].append(c.text)
            steps[p.id].append({"step": step, "messages": [{"role": x.role, "content": x.content} for x in m],
                                "text": c.text, "key": c.key, "cache_hit": c.cache_hit,
                                "generated_tokens": c.generated_tokens})
    return {p.id: {"steps": steps[p.id],
                   "initial_letter": prompts.selfcritic_letter(replies[p.id][0], p.choices or ()),
                   "letter": prompts.selfcritic_letter(replies[p.id][2], p.choices or ())}
            for p in problems}
