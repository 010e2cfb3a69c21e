"""The ART methods and baselines, each over one task's test problems (ART §4, App. A.4).

    rows = METHOD_FNS[name](ctx)    # ctx: Context(llm, task, problems, pool, description, …)

- fewshot: k random held-out examples as input/answer pairs, no reasoning.
- autocot: AutoCoT (art/autocot.py): the held-out questions are clustered (k-means on
  MiniLM embeddings, k = autocot_k); per cluster, the question nearest the centroid whose
  zero-shot chain of thought passes AutoCoT's heuristics (the model's own answer, right or
  wrong) becomes a demonstration for every test problem.
- art / art_regenerate / art_notools: programs from the selected library demonstrations
  (runner modes pause / regenerate / notools).
- art_sc: self-consistency, k sampled programs per problem (pause mode), vote on `Ans`.
Multi-turn work runs as retrace.engine.scheduler tasks, so no request waits for another's turn:
each program (ART methods, art/runner.py) and each AutoCoT cluster's search for a
demonstration is one task.
Every row keeps the prompts' tails and the traces; scoring happens in the summary stage.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrace.art.metrics import choice_of, format_input, gold_answer, vote
from retrace.art.runner import END_STOPS, ProgramRunner, cut_after_answer
from retrace.methods.base import derive_seed
from retrace.util.records import Problem, Request, Sampling
from retrace.util.templates import render


@dataclass(frozen=True)
class Settings:
    """The block's `settings:` as ART's methods read them, typed and read-only (their defaults
    and meanings: art/plan.py SETTINGS and OPTIONAL_SETTINGS, which `plan.check` fills and checks)."""

    max_steps: int
    segment_tokens: int
    program_tokens: int
    answer_tokens: int
    cot_tokens: int
    fewshot_k: int
    autocot_k: int
    sc_k: int
    sc_temperature: float
    cluster_examples: int
    demos_per_task: int
    autocot_selection: str = "kmeans"

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> Settings:
        """From a checked block's settings mapping (an unknown key is a TypeError here)."""
        return cls(**settings)


@dataclass
class Context:
    llm: Any  # retrace.engine.llm.LLM (generate, run_tasks); not imported: no code of its in the closure
    task: object  # the dataset's task plugin (kind, extract_answer, is_correct)
    problems: list[Problem]  # test problems
    pool: list[Problem]  # held-out problems (demonstrations, AutoCoT seeds)
    description: str
    settings: Settings  # a settings mapping given here is read into Settings
    seed: int = 0
    demos: list[str] = field(default_factory=list)  # library demonstrations (ART methods)
    tools: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.settings, Settings):
            self.settings = Settings.of(self.settings)


def _request(ctx: Context, prompt: str, max_tokens: int, stop=END_STOPS, temperature: float = 0.0) -> Request:
    return Request(
        prompt=prompt,
        tag="art-baseline",
        sampling=Sampling(temperature=temperature, max_tokens=max_tokens, stop=tuple(stop), seed=ctx.seed),
    )


def _complete(
    ctx: Context, prompts: list[str], max_tokens: int, stop=END_STOPS, temperature: float = 0.0
) -> list:
    return ctx.llm.generate([_request(ctx, p, max_tokens, stop, temperature) for p in prompts])


def _row(p: Problem, answer: str | None, **extra) -> dict:
    return {"id": p.id, "answer": answer, **extra}


def fewshot(ctx: Context) -> list[dict]:
    rng = random.Random(ctx.seed)
    shots = rng.sample(ctx.pool, min(ctx.settings.fewshot_k, len(ctx.pool)))
    examples = [(format_input(s), gold_answer(s)) for s in shots]
    prompts = [
        render("art_fewshot.j2", description=ctx.description, examples=examples, input=format_input(p))
        for p in ctx.problems
    ]
    done = _complete(ctx, prompts, ctx.settings.answer_tokens, stop=("\n",))
    return [
        _row(p, c.text.strip() or None, text=c.text, key=c.key, shots=[s.id for s in shots])
        for p, c in zip(ctx.problems, done)
    ]


def _answer_of(text: str) -> tuple[str, str | None]:
    """(reasoning, answer) of a free-form chain of thought that ends in an "Ans:" line."""
    body, found = cut_after_answer(text)
    if not found:
        return text.strip(), None
    reasoning, _, ans = body.rpartition("Ans:")
    return reasoning.strip(), ans.strip() or None


def autocot(ctx: Context) -> list[dict]:
    """AutoCoT (art/autocot.py): one zero-shot chain per cluster of held-out questions."""
    from retrace.art import autocot as ac

    texts = [format_input(s) for s in ctx.pool]
    k = ctx.settings.autocot_k
    if ctx.settings.autocot_selection == "random":  # the ART paper's (§A.4)
        groups = ac.random_groups(len(texts), k, ctx.seed)
    else:  # Zhang et al.'s AutoCoT
        groups = ac.cluster(texts, k, ctx.seed)

    def cot(i: int):
        """Question i's zero-shot chain, as a scheduler task: returns (reasoning, answer)."""
        zero = render("art_autocot.j2", description=ctx.description, demos=[], input=texts[i])
        reasoning, ans = _answer_of((yield _request(ctx, zero, ctx.settings.cot_tokens)).text)
        return reasoning, None if "\n----" in reasoning else ans  # a chain that ran on is not kept

    picked = ac.choose(cot, texts, groups, ctx.llm.run_tasks)
    demos = [(texts[d["index"]], " ".join(d["rationale"].split()), d["answer"]) for d in picked]
    prompts = [
        render("art_autocot.j2", description=ctx.description, demos=demos, input=format_input(p))
        for p in ctx.problems
    ]
    done = _complete(ctx, prompts, ctx.settings.cot_tokens)
    about = {
        "demos": [ctx.pool[d["index"]].id for d in picked],
        "clusters": [[ctx.pool[i].id for i in g] for g in groups],
    }
    return [
        _row(p, _answer_of(c.text)[1], text=c.text, key=c.key, **about) for p, c in zip(ctx.problems, done)
    ]


def _programs(ctx: Context, mode: str, k: int = 1, temperature: float = 0.0) -> list[list]:
    s = ctx.settings
    runner = ProgramRunner(
        ctx.llm,
        ctx.tools if mode != "notools" else {},
        mode=mode,
        max_steps=s.max_steps,
        segment_tokens=s.segment_tokens,
        program_tokens=s.program_tokens,
        temperature=temperature,
        seed=ctx.seed,
    )
    prefix = render("art_demos.j2", demos=ctx.demos) + "\n"
    heads = [render("art_head.j2", description=ctx.description, input=format_input(p)) for p in ctx.problems]
    # sample j of a problem gets the spine's per-sample seed (methods/base.py derive_seed), so
    # self-consistency's k programs are k draws, not k copies of one seeded draw
    seeds = [derive_seed(ctx.seed, p.id, j) for p in ctx.problems for j in range(k)]
    traces = runner.run(
        prefix, [h for h in heads for _ in range(k)], [j for _ in heads for j in range(k)], seeds
    )
    return [traces[i * k : (i + 1) * k] for i in range(len(heads))]


def _program_rows(ctx: Context, mode: str) -> list[dict]:
    return [_row(p, t[0].answer, trace=t[0].to_dict()) for p, t in zip(ctx.problems, _programs(ctx, mode))]


def art(ctx: Context) -> list[dict]:
    return _program_rows(ctx, "pause")


def art_regenerate(ctx: Context) -> list[dict]:
    return _program_rows(ctx, "regenerate")


def art_notools(ctx: Context) -> list[dict]:
    return _program_rows(ctx, "notools")


def art_sc(ctx: Context) -> list[dict]:
    k, temp = ctx.settings.sc_k, ctx.settings.sc_temperature
    rows = []
    for p, traces in zip(ctx.problems, _programs(ctx, "pause", k, temp)):
        answers = [t.answer for t in traces]
        key = (lambda a: choice_of(a, p)) if p.choices else (lambda a: " ".join(a.lower().split()))
        rows.append(_row(p, vote(answers, key), votes=answers, traces=[t.to_dict() for t in traces]))
    return rows


METHOD_FNS = {
    "fewshot": fewshot,
    "autocot": autocot,
    "art": art,
    "art_regenerate": art_regenerate,
    "art_notools": art_notools,
    "art_sc": art_sc,
}
