"""ART on the simulated engine (art/simulated.py): the real runner parses and runs its programs
in every mode (the code tool's request and a code-execute call really happen), the baselines
read its answers, and the answers are right with the planted probability per label."""

from __future__ import annotations

import pytest

from retrace.art import baselines
from retrace.art.metrics import grade
from retrace.art.program import parse
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from retrace.store.data import write_problems
from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolOutput
from retrace.tools.code import code_for
from retrace.util.records import Problem
from retrace.util.registry import BACKENDS, TASKS

MODEL = {"name": "sim-model", "fingerprint": "sim"}
SETTINGS = {
    "max_steps": 4,
    "segment_tokens": 24,
    "program_tokens": 64,
    "answer_tokens": 8,
    "cot_tokens": 32,
    "fewshot_k": 2,
    "autocot_k": 1,
    "sc_k": 3,
    "sc_temperature": 0.7,
    "cluster_examples": 2,
    "demos_per_task": 1,
}
DEMO = "Description: Add.\nInput: 1 + 1\nQ1: [code execute] Run it.\n#1: 2\nQ2: [EOQ]\nAns: 2"


class Executed(Tool):
    """code execute without a sandbox (unit test): evaluates the generated `ans = a + b`."""

    name = "code_execute"
    calls: list = []

    def __call__(self, call):
        code = code_for(call)
        Executed.calls.append(code)
        scope: dict = {}
        exec(code.replace("print(ans)", ""), scope)  # the engine's two fixed lines
        return ToolOutput(str(scope["ans"]))


@pytest.fixture()
def problems(tmp_path):
    items = [
        Problem(id=f"w{i}", question=f"Unscramble word {i}: lpepa{i}", gold=f"apple{i}") for i in range(300)
    ]
    items += [
        Problem(id=f"c{i}", question=f"Pick {i}?", gold="B", choices=("no", "yes", "maybe"))
        for i in range(300)
    ]
    path = tmp_path / "problems.jsonl"
    write_problems(path, items)
    return path, items


def task_of(p: Problem):
    return TASKS.get("bigbench_mc" if p.choices else "bigbench_exact")


def llm_for(tmp_path, problems_path, label: str, effects=None) -> CachedLLM:
    engine = {
        "problems": str(problems_path),
        "dataset": "task",
        "label": label,
        "effects": effects,
        "batch_size": 8,
    }
    cls = BACKENDS.get("simulated")
    cache = RequestCache(tmp_path / f"{label}.sqlite", job="test")
    return CachedLLM(
        lambda: cls(MODEL, engine), "simulated", MODEL, cache, identity=cls.identity(MODEL, engine)
    )


def context(llm, items, tools=None, seed=0) -> baselines.Context:
    return baselines.Context(
        llm,
        TASKS.get("bigbench_exact"),
        items[:4],
        items[4:10],
        "Unscramble.",
        SETTINGS,
        seed,
        [DEMO],
        tools or {},
    )


@pytest.mark.parametrize("method", ["art", "art_regenerate", "art_notools", "art_sc"])
def test_the_real_runner_parses_and_runs_every_mode(tmp_path, problems, method):
    path, items = problems
    llm = llm_for(tmp_path, path, method)
    Executed.calls = []
    tools = {"code_generate": TOOLS.get("code_generate")({}, llm=llm), "code_execute": Executed()}
    rows = baselines.METHOD_FNS[method](context(llm, items, tools if method != "art_notools" else {}))
    traces = [t for r in rows for t in (r.get("traces") or [r["trace"]])]
    assert all(t["complete"] and t["error"] is None for t in traces), traces[0]
    for t in traces:
        prog = parse(t["head"] + "\n" + t["program"])
        assert prog.tags() == ["code generate", "code execute"] and prog.answer == t["answer"]
        assert t["answer"] in (items[int(t["head"].split("word ")[1].split(":")[0])].gold, "-100003")
    if method == "art_notools":  # the "model" filled the outputs itself: no tool ran
        assert not Executed.calls and all(not t["tool_calls"] for t in traces)
    else:  # the code tool's request went to the engine, and the generated code was executed
        assert Executed.calls and all(c == "ans = 2 + 2\nprint(ans)" for c in Executed.calls)
        assert all([c["output"] for c in t["tool_calls"]][-1] == "4" for t in traces)
        assert all(p.steps[1].output == "4" for p in (parse(t["head"] + "\n" + t["program"]) for t in traces))


@pytest.mark.parametrize("method", ["fewshot", "autocot"])
def test_the_baselines_read_an_answer_for_every_question(tmp_path, problems, method, monkeypatch):
    from retrace.art import autocot

    monkeypatch.setattr(autocot, "embed", lambda texts: [[float(i % 3), 1.0] for i, _ in enumerate(texts)])
    path, items = problems
    mc = items[300:]
    ctx = context(llm_for(tmp_path, path, method), mc)
    ctx.task = task_of(mc[0])
    rows = baselines.METHOD_FNS[method](ctx)
    assert len(rows) == 4 and all(grade(ctx.task, p, r["answer"])[1] in "ABC" for p, r in zip(mc, rows))


def program_answers(llm, items, seed: int, temperature: float) -> list[bool]:
    """Right or wrong, per item: one whole program (notools) each, graded as ART's summary does."""
    ctx = context(llm, items, seed=seed)
    ctx.problems = items
    traces = baselines._programs(ctx, "notools", 1, temperature)
    return [grade(task_of(p), p, t[0].answer)[0] for p, t in zip(items, traces)]


def test_correctness_follows_the_planted_probability_and_greedy_seeds_repeat(tmp_path, problems):
    path, items = problems
    effects = tmp_path / "effects.yaml"
    effects.write_text("effects:\n  - {label: art, points: 20}\n")
    acc = {}
    for label in ("art", "art_notools"):
        right = program_answers(llm_for(tmp_path, path, label, str(effects)), items, 0, 0.0)
        acc[label] = sum(right) / len(right)
    assert acc["art"] - acc["art_notools"] == pytest.approx(0.20, abs=0.08)
    assert 0.3 <= acc["art_notools"] <= 0.5  # base_accuracy 0.4, on free text and multiple choice
    llm = llm_for(tmp_path, path, "art_sc", str(effects))
    greedy = [program_answers(llm, items[:100], seed, 0.0) for seed in (0, 1)]
    sampled = [program_answers(llm, items[:100], seed, 0.7) for seed in (0, 1)]
    assert greedy[0] == greedy[1] and sampled[0] != sampled[1]


def test_vote_gain_is_what_the_engines_votes_do(tmp_path, problems):
    """vote_gain (the truth of a self-consistency row in a rehearsal) against the engine's own
    draws: 15 sampled programs per question, voted as art_sc votes. Settings where voting
    matters: questions concentrated around 0.3, independent samples."""
    from retrace.art.metrics import vote
    from retrace.art.simulated import vote_gain

    path, items = problems
    settings = {"base_accuracy": 0.3, "concentration": 20.0, "correlation": 0.0}
    engine = {"problems": str(path), "dataset": "task", "label": "art_sc", "batch_size": 8, **settings}
    sim = BACKENDS.get("simulated")(MODEL, engine)
    single, voted = [], []
    for p in items[:300]:
        answers = [
            baselines.cut_after_answer(sim._complete(request(p, seed=7, k=j)).text)[0].rpartition("Ans: ")[2]
            for j in range(15)
        ]
        single.append(answers[0] == p.gold)
        voted.append(vote(answers) == p.gold)
    measured = (sum(voted) - sum(single)) / 300
    assert vote_gain(0.0, 15, settings) == pytest.approx(measured, abs=0.06)
    assert vote_gain(0.0, 15, settings) < -0.15 and vote_gain(0.1, 2, settings) == 0.0


def request(p: Problem, seed: int, k: int):
    from retrace.util.records import Request, Sampling

    head = f"Description: Unscramble.\nInput: {p.question}\nQ1:"
    sampling = Sampling(temperature=0.7, seed=seed * 1000 + k, max_tokens=64, stop=("\n----",))
    return Request(prompt=head, sample_index=k, tag="art", sampling=sampling)
