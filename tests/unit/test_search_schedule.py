"""Beam and lookahead search as one scheduler task per problem (retrace.engine.scheduler fan-outs).

Each problem's search moves on as soon as its own step is back (problem B's step 2 does not
wait for problem A's step 1), and the requests and rows are exactly those of the former
lockstep implementation, on an async engine and on synchronous waves alike.
"""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import Future
from dataclasses import replace

import pytest
from fake_backend import manifest, method_cfg, smoke_math_problems
from judged_backend import JudgedBackend, is_judge, judged_llm
from test_beam import SEP, responder
from test_methods import ctx
from test_scheduler import wait_for

from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from retrace.util.registry import METHODS

SETTINGS = {
    "beam": {"width": 2, "expand": 2, "max_steps": 4},
    "lookahead": {"width": 2, "expand": 2, "max_steps": 3, "lookahead": 2},
}
# Frozen from the lockstep implementation (commit 794b60d) on `mixed` with seed 11 and four
# problems: sha256 of the sorted (tag, cache key) pairs the engine saw, and of the rows.
# A deliberate change to the requests (prompt, template, key material) must re-freeze them.
# Rows re-frozen after the judge template's comment changed (its sha256 is in every row).
FROZEN = {
    "beam": (
        "6aa5f6db6862670331f7f52e11fa7d3f60b6550e7793d6827f512435394904a5",
        "ffd1356f668e593cc6bbf84f027fd6f1bc346993f7ab1fabda8569df36b86858",
    ),
    "lookahead": (
        "8924ce1a6abfdae64b1d169b875686d563b1c45c55e8baa17ed63939d2a6d71a",
        "d3d98969cef4cdb5bd2605b3605ecd7f8b33b43a15a6d912069c95e194cff0c0",
    ),
}


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def hashed(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def mixed(request):
    """Steps and verdicts that are a function of the request alone, chosen so that problems
    diverge: some steps answer, some are empty (eos), the rest go on."""
    if is_judge(request):
        return (hashed(request.messages[0].content) % 97) / 100
    prefix = request.messages[-1].content if request.continue_final else ""
    n = hashed(f"{request.sampling.seed}:{request.sample_index}:{prefix}:{request.messages[0].content}")
    if n % 7 == 0:
        return f"so \\boxed{{{n % 10}}}" + SEP
    return SEP if n % 7 == 1 else f"s{n % 1000}" + SEP + "never"


@pytest.mark.parametrize("name", ["beam", "lookahead"])
def test_requests_and_rows_are_those_of_the_lockstep_search(tmp_path, name):
    seen = {}
    for mode, engine in (("wave", {"batch_size": 3}), ("async", {"async": True})):
        llm, engines = judged_llm(tmp_path / mode, mixed, **engine)
        rows = METHODS.get(name)(smoke_math_problems(4), method_cfg(name, **SETTINGS[name]), llm, ctx(11))
        trace = sorted((r.tag, llm.key(r)) for e in engines for r in e.requests_seen)
        seen[mode] = (digest(trace), digest(rows))
    assert seen["async"] == seen["wave"] == FROZEN[name]


class HoldingEngine(JudgedBackend):
    """Answers each submitted request at once, except those whose tag starts with `hold`:
    they wait for `release()`. Records the tags in submission order."""

    def __init__(self, respond, hold: str):
        super().__init__(manifest(), {"script": [""], "respond": respond})
        self.hold, self.held, self.submitted = hold, [], []

    def submit(self, request):
        self.submitted.append(request.tag)
        future = Future()
        if request.tag.startswith(self.hold):
            self.held.append((future, request))
        else:
            future.set_result(self._complete(request))
        return future

    def release(self) -> None:
        for future, request in self.held:
            if not future.done():
                future.set_result(self._complete(request))


@pytest.mark.parametrize("name", ["beam", "lookahead"])
def test_a_problem_moves_on_while_another_problems_step_is_slow(tmp_path, name):
    a, b = smoke_math_problems(2)
    engine = HoldingEngine(responder(greedy=lambda t, prefix: "g"), hold=f"{a.id}:step0")
    llm = CachedLLM(lambda: engine, "scripted", manifest(), RequestCache(tmp_path / "c", job="t"))
    cfg = method_cfg(name, **{**SETTINGS[name], "max_steps": 2})
    rows = []
    worker = threading.Thread(target=lambda: rows.extend(METHODS.get(name)([a, b], cfg, llm, ctx())))
    worker.start()
    try:
        # Lockstep would hold B's step 1 back until A's step 0 returns: a 5 s wait then fails.
        wait_for(lambda: any(t.startswith(f"{b.id}:step1") for t in engine.submitted), limit=1000)
        assert all(not f.done() for f, _ in engine.held)  # A's step 0 is still running
    finally:
        engine.release()
        worker.join(timeout=60)
    assert [r["problem_id"] for r in rows] == [a.id, b.id]
    assert all(len(r["extra"]["steps"]) == 2 for r in rows)


def test_a_judge_on_another_engine_is_called_from_the_task(tmp_path):
    """With `scorer.model` set, the judge runs on ctx.scorer_llm, which the scheduler of the
    policy's engine does not drive: it is called directly, and the rows are unchanged."""
    other = {**manifest(), "name": "other-model"}
    judge_engines = []

    def judge_engine():
        judge_engines.append(JudgedBackend(other, {"script": [""], "respond": mixed}))
        return judge_engines[-1]

    judge = CachedLLM(judge_engine, "scripted", other, RequestCache(tmp_path / "judge", job="t"))
    cfg = method_cfg("beam", **SETTINGS["beam"])
    same_llm, _ = judged_llm(tmp_path / "same", mixed)
    same = METHODS.get("beam")(smoke_math_problems(2), cfg, same_llm, ctx(11))
    llm, engines = judged_llm(tmp_path / "policy", mixed)
    cfg = method_cfg("beam", **SETTINGS["beam"], scorer={**cfg["scorer"], "model": "other-model"})
    apart = METHODS.get("beam")(smoke_math_problems(2), cfg, llm, replace(ctx(11), scorer_llm=judge))
    assert not any(is_judge(r) for e in engines for r in e.requests_seen)
    assert all(is_judge(r) for e in judge_engines for r in e.requests_seen) and judge_engines
    assert {r["extra"]["scorer"]["model_name"] for r in apart} == {"other-model"}
    unnamed = lambda rows: [
        {**r, "extra": {**r["extra"], "scorer": {**r["extra"]["scorer"], "model_name": None}}} for r in rows
    ]
    assert unnamed(apart) == unnamed(same)  # same judge keys: same scores


@pytest.mark.slow
@pytest.mark.parametrize("name", ["beam", "lookahead"])
def test_task_and_lockstep_schedules_give_identical_rows_on_smollm2(
    tmp_path, name, llamacpp_smollm2_det, smollm2_manifest
):
    """Deterministic mode on SmolLM2: per-problem tasks (each request submitted as soon as its
    problem is ready) reproduce the lockstep schedule (every ready request in one wave)."""
    from test_refine import _Waves

    # Small (two problems, 2 + 2 expansions each) because CPU time on a shared box is dear.
    cfg = method_cfg(
        name,
        **{**SETTINGS[name], "expand": 1, "max_steps": 2, "lookahead": 1, "sampling": {"max_tokens": 12}},
    )
    rows = {}
    for mode, engine in (("tasks", llamacpp_smollm2_det), ("waves", _Waves(llamacpp_smollm2_det))):
        llm = CachedLLM(lambda: engine, "llamacpp", smollm2_manifest, RequestCache(tmp_path / mode))
        rows[mode] = METHODS.get(name)(smoke_math_problems(2), cfg, llm, ctx(3))
    assert rows["tasks"] == rows["waves"]
    texts = {c["text"] for r in rows["waves"] for step in r["extra"]["steps"] for c in step["candidates"]}
    assert len(texts) > 1 and len(rows["waves"]) == 2  # real, varied text
