"""Greedy and majority (retrace.methods) on the smoke_math task with the scripted backend."""

from __future__ import annotations

import pytest
from fake_backend import engine_requests, method_cfg, scripted_llm, smoke_math_problems

from retrace.methods.base import MethodContext, derive_seed
from retrace.store.cache import RequestCache
from retrace.util.registry import METHODS, TASKS

ANSWERS = {"seeded": True, "script": [f"so the answer is \\boxed{{{i}}}" for i in range(10)]}


@pytest.fixture(scope="module")
def problems():
    return smoke_math_problems(3)


def ctx(seed: int = 0) -> MethodContext:
    return MethodContext(seed=seed, task=TASKS.get("smoke_math"), template="math_cot.j2")


def test_greedy_asks_once_per_problem_at_temperature_zero(tmp_path, problems):
    llm, engines = scripted_llm(tmp_path, ANSWERS)
    cfg = method_cfg("greedy", sampling={"temperature": 0.9})  # greedy must ignore it
    rows = METHODS.get("greedy")(problems, cfg, llm, ctx(seed=5))
    sent = engine_requests(engines)
    assert len(sent) == len(problems)
    assert {r.sampling.temperature for r in sent} == {0.0}
    assert {r.sampling.max_tokens for r in sent} == {cfg["sampling"]["max_tokens"]}
    assert {r.sampling.seed for r in sent} == {5}
    assert [r["problem_id"] for r in rows] == [p.id for p in problems]
    assert all(len(r["samples"]) == 1 and r["method"] == "greedy" for r in rows)
    assert [r["samples"][0]["text"] for r in rows] == [c.text for c in engines[0].generate(sent)]


def test_prompt_is_the_rendered_task_template(tmp_path, problems):
    llm, engines = scripted_llm(tmp_path, ANSWERS)
    METHODS.get("greedy")(problems[:1], method_cfg("greedy"), llm, ctx())
    [request] = engine_requests(engines)
    [message] = request.messages
    assert message.role == "user"
    assert message.content == TASKS.get("smoke_math").prompt(problems[0], "math_cot.j2")
    assert problems[0].question in message.content and "\\boxed{}" in message.content


def test_majority_draws_n_distinct_samples_per_problem(tmp_path, problems):
    llm, engines = scripted_llm(tmp_path, ANSWERS)
    cfg = method_cfg("majority", n=4)
    rows = METHODS.get("majority")(problems, cfg, llm, ctx(seed=3))
    sent = engine_requests(engines)
    assert len(sent) == 4 * len(problems)
    for p, row in zip(problems, rows):
        mine = [r for r in sent if r.tag.startswith(p.id + "#")]
        assert [r.sample_index for r in mine] == [0, 1, 2, 3]
        assert [r.sampling.seed for r in mine] == [derive_seed(3, p.id, i) for i in range(4)]
        assert len({r.sampling.seed for r in mine}) == 4
        assert {r.sampling.temperature for r in mine} == {cfg["sampling"]["temperature"]}
        assert [s["index"] for s in row["samples"]] == [0, 1, 2, 3]
        assert row["problem_id"] == p.id and row["method"] == "majority"
    all_seeds = [r.sampling.seed for r in sent]
    assert len(set(all_seeds)) == len(all_seeds)  # problems do not share seeds either


def test_extending_n_reuses_the_first_samples(tmp_path, problems):
    cache = RequestCache(tmp_path / "requests.sqlite")
    small, small_engines = scripted_llm(cache, ANSWERS)
    rows2 = METHODS.get("majority")(problems, method_cfg("majority", n=2), small, ctx())
    large, large_engines = scripted_llm(cache, ANSWERS)
    rows4 = METHODS.get("majority")(problems, method_cfg("majority", n=4), large, ctx())
    assert len(engine_requests(small_engines)) == 2 * len(problems)
    new = engine_requests(large_engines)
    assert sorted({r.sample_index for r in new}) == [2, 3] and len(new) == 2 * len(problems)
    for r2, r4 in zip(rows2, rows4):
        assert [s["key"] for s in r4["samples"][:2]] == [s["key"] for s in r2["samples"]]
        assert [s["text"] for s in r4["samples"][:2]] == [s["text"] for s in r2["samples"]]
        assert [s["cache_hit"] for s in r4["samples"]] == [True, True, False, False]


def test_shrinking_n_needs_no_engine(tmp_path, problems):
    cache = RequestCache(tmp_path / "requests.sqlite")
    first, _ = scripted_llm(cache, ANSWERS)
    METHODS.get("majority")(problems, method_cfg("majority", n=4), first, ctx())
    again, engines = scripted_llm(cache, ANSWERS)
    rows = METHODS.get("majority")(problems, method_cfg("majority", n=3), again, ctx())
    assert engines == [] and again.usage.engine_loads == 0
    assert all(len(r["samples"]) == 3 for r in rows)


def test_another_run_seed_draws_new_samples(tmp_path, problems):
    cache = RequestCache(tmp_path / "requests.sqlite")
    seed0, _ = scripted_llm(cache, ANSWERS)
    METHODS.get("majority")(problems, method_cfg("majority", n=2), seed0, ctx(seed=0))
    seed1, engines = scripted_llm(cache, ANSWERS)
    METHODS.get("majority")(problems, method_cfg("majority", n=2), seed1, ctx(seed=1))
    assert len(engine_requests(engines)) == 2 * len(problems)


def test_derive_seed_depends_on_every_part():
    base = derive_seed(0, "smoke_math/m00", 0)
    assert base == derive_seed(0, "smoke_math/m00", 0)
    assert (
        len(
            {
                base,
                derive_seed(1, "smoke_math/m00", 0),
                derive_seed(0, "smoke_math/m01", 0),
                derive_seed(0, "smoke_math/m00", 1),
            }
        )
        == 4
    )
    assert 0 <= base < 2**31
