"""Breadth-depth refinement (retrace.methods.refine) on smoke_math with the scripted backend,
plus one slow check on the real SmolLM2 engine."""

from __future__ import annotations

import pytest
from fake_backend import engine_requests, method_cfg, scripted_llm, smoke_math_problems

from retrace.engine.llm import CachedLLM
from retrace.methods.base import MethodContext
from retrace.store.cache import RequestCache
from retrace.util.records import Message
from retrace.util.registry import METHODS, TASKS
from retrace.util.templates import render

CONTINUE, CRITIQUE = render("refine_continue.j2"), render("refine_critique.j2")
CORRECT = render("refine_correct.j2", has_critique=True)
CORRECT_ALONE = render("refine_correct.j2", has_critique=False)
AFFIRM = render("refine_affirm.j2")
# Keys are matched in the last user message, first match wins ("" = the depth-0 sample).
SCRIPT = {
    "seeded": True,
    "script": {
        "act as a corrector": ["corrected: \\boxed{5}", "corrected: \\boxed{7}"],
        "act as a strict critic": ["step 2 is wrong", "the solution is correct"],
        "Continue working": ["continuing, \\boxed{5}", "continuing"],
        "": [f"so the answer is \\boxed{{{i}}}" for i in range(10)],
    },
}


@pytest.fixture(scope="module")
def problems():
    return smoke_math_problems(2)


def ctx(seed: int = 0) -> MethodContext:
    return MethodContext(seed=seed, task=TASKS.get("smoke_math"), template="math_cot.j2")


def counted(llm):
    """Record the size of every engine call. The scripted engine batches synchronously, so
    the scheduler hands it waves: every rollout whose previous call returned."""
    calls, make = [], llm._factory

    def factory():
        engine = make()
        inner = engine.generate
        engine.generate = lambda requests: calls.append(len(requests)) or inner(requests)
        return engine

    llm._factory = factory
    return calls


def refine(problems, cache, seed=0, script=SCRIPT, **changes):
    llm, engines = scripted_llm(cache, script)
    calls = counted(llm)
    rows = METHODS.get("refine")(problems, method_cfg("refine", **changes), llm, ctx(seed))
    return rows, engine_requests(engines), calls, llm


def by_rollout(requests):
    out: dict = {}
    for r in requests:
        pid, rest = r.tag.rsplit("#", 1)  # tags: "<problem id>#<rollout>[/d<depth>/<role>]"
        out.setdefault((pid, rest.split("/")[0]), []).append(r)
    return out


def test_depth_zero_reuses_the_majority_sample_set(tmp_path, problems):
    cache = RequestCache(tmp_path / "requests.sqlite")
    maj, _ = scripted_llm(cache, SCRIPT)
    maj_rows = METHODS.get("majority")(problems, method_cfg("majority", n=4), maj, ctx(seed=3))
    rows, sent, _, _ = refine(problems, cache, seed=3, n=4, depth=2)
    assert all("/d" in r.tag for r in sent)  # no depth-0 request reached the engine
    assert len(sent) == 3 * 4 * len(problems) * 2
    for m, r in zip(maj_rows, rows):
        assert [d["keys"]["sample"] for d in r["extra"]["depths"][0]] == [s["key"] for s in m["samples"]]
        assert [d["text"] for d in r["extra"]["depths"][0]] == [s["text"] for s in m["samples"]]


def test_refine_sampling_block_is_the_majority_block():
    refine_cfg, majority_cfg = method_cfg("refine"), method_cfg("majority")
    assert refine_cfg["sampling"] == majority_cfg["sampling"]
    assert refine_cfg["n"] == majority_cfg["n"]


@pytest.mark.parametrize("critic, per_round", [("model", 3), ("affirm", 2), ("none", 2), ("random", 2)])
def test_calls_per_round_follow_the_critic(tmp_path, problems, critic, per_round):
    rows, sent, calls, _ = refine(problems, tmp_path, n=3, depth=2, critic=critic)
    # All rollouts answer together here, so each wave holds one role of one depth for all.
    assert calls == [3 * len(problems)] * (1 + per_round * 2)
    assert len(sent) == 3 * len(problems) * (1 + per_round * 2)
    roles = {r.tag.rsplit("/", 1)[-1] for r in sent if "/d" in r.tag}
    assert roles == ({"continue", "critique", "correct"} if critic == "model" else {"continue", "correct"})
    assert all(r["extra"]["critic"] == critic for r in rows)


@pytest.mark.parametrize("critic", ["model", "affirm", "none", "random"])
def test_histories_are_append_only(tmp_path, problems, critic):
    _, sent, _, _ = refine(problems, tmp_path, n=2, depth=2, critic=critic)
    chains = by_rollout(sent)
    assert len(chains) == 2 * len(problems)
    for chain in chains.values():
        assert len(chain) == 1 + (3 if critic == "model" else 2) * 2
        for a, b in zip(chain, chain[1:]):
            assert b.messages[: len(a.messages)] == a.messages
            assert b.messages[len(a.messages)].role == "assistant"
            assert b.messages[-1].role == "user"


def _round_requests(chain, depth):
    return [r for r in chain if f"/d{depth}/" in r.tag]


def test_latest_history_conditions_each_round_on_the_question_and_previous_trace(tmp_path, problems):
    """history: latest: round d's first prompt is the question, the trace of depth d - 1 as the
    assistant's answer, and the continue prompt; within the round, calls stay append-only."""
    rows, sent, _, _ = refine(problems, tmp_path, n=2, depth=3, history="latest")
    for (pid, rollout), chain in by_rollout(sent).items():
        row = next(r for r in rows if r["problem_id"] == pid)
        question = chain[0].messages  # the depth-0 sample's request
        for depth in (1, 2, 3):
            first, *rest = _round_requests(chain, depth)
            trace = row["extra"]["depths"][depth - 1][int(rollout)]["text"]
            assert first.messages == question + (Message("assistant", trace), Message("user", CONTINUE))
            for a, b in zip([first, *rest], rest):
                assert b.messages[: len(a.messages)] == a.messages
    assert all(r["extra"]["history"] == "latest" for r in rows)


def test_full_history_carries_every_earlier_round(tmp_path, problems):
    rows, sent, _, _ = refine(problems, tmp_path, n=2, depth=3)
    for chain in by_rollout(sent).values():
        last_of_round2 = _round_requests(chain, 2)[-1]
        first_of_round3 = _round_requests(chain, 3)[0]
        assert first_of_round3.messages[: len(last_of_round2.messages)] == last_of_round2.messages
        assert len(first_of_round3.messages) == len(chain[0].messages) + 2 * 3 * 2 + 2
    assert all("history" not in r["extra"] for r in rows)  # full-history rows are as before


def test_both_histories_share_depth_one_and_differ_after(tmp_path, problems):
    _, full, _, _ = refine(problems, tmp_path / "a", n=2, depth=2)
    _, latest, _, _ = refine(problems, tmp_path / "b", n=2, depth=2, history="latest")
    d1 = lambda sent: [r.messages for r in sent if "/d1/" in r.tag]
    d2 = lambda sent: [r.messages for r in sent if "/d2/" in r.tag]
    assert d1(full) == d1(latest)
    assert all(len(b) < len(a) for a, b in zip(d2(full), d2(latest)))


def test_unknown_history_is_refused(tmp_path, problems):
    with pytest.raises(ValueError, match="unknown history 'all'; valid: full, latest"):
        refine(problems, tmp_path, history="all")


def test_affirm_puts_the_fixed_text_in_the_critique_slot(tmp_path, problems):
    _, sent, _, _ = refine(problems, tmp_path, n=2, depth=2, critic="affirm")
    corrects = [r for r in sent if r.tag.endswith("/correct")]
    assert len(corrects) == 2 * len(problems) * 2
    for r in corrects:
        assert r.messages[-3:] == (
            Message("user", CRITIQUE),
            Message("assistant", AFFIRM),
            Message("user", CORRECT),
        )
    assert not any(r.messages[-1].content == CRITIQUE for r in sent)


def test_no_critic_goes_straight_from_continue_to_correct(tmp_path, problems):
    _, sent, _, _ = refine(problems, tmp_path, n=2, depth=1, critic="none")
    for r in (r for r in sent if r.tag.endswith("/correct")):
        assert r.messages[-3].content == CONTINUE and r.messages[-1].content == CORRECT_ALONE
        assert all(m.content != CRITIQUE for m in r.messages)


def test_random_critic_is_seeded_word_salad(tmp_path, problems):
    rows_a, sent, _, _ = refine(problems, tmp_path / "a", n=2, depth=1, critic="random")
    rows_b, _, _, _ = refine(problems, tmp_path / "b", n=2, depth=1, critic="random")
    vocabulary = set(render("refine_random_critic.j2").split())
    salads = [r.messages[-2].content for r in sent if r.tag.endswith("/correct")]
    # critique length: 0.75 words per token of the critique budget (here sampling.max_tokens)
    words = round(0.75 * method_cfg("refine")["sampling"]["max_tokens"])
    assert all(len(s.split()) == words and set(s.split()) <= vocabulary for s in salads)
    assert len(set(salads)) == len(salads)  # rollouts get different text
    texts = lambda rows: [d["critique"] for r in rows for d in r["extra"]["depths"][1]]
    assert texts(rows_a) == texts(rows_b)


def test_every_depth_is_stored_with_cumulative_tokens(tmp_path, problems):
    rows, _, _, llm = refine(problems, tmp_path, n=3, depth=2)
    for row in rows:
        depths = row["extra"]["depths"]
        assert len(depths) == 3 and all(len(d) == 3 for d in depths)
        assert [d["source"] for d in depths[0]] == ["sample"] * 3
        for d in depths[1:]:
            assert all({"text", "continue", "critique", "correct", "keys"} <= set(rec) for rec in d)
        for i, sample in enumerate(row["samples"]):
            gen = [depths[d][i]["generated_tokens"] for d in range(3)]
            assert gen == sorted(gen) and gen[0] < gen[2]
            assert sample["text"] == depths[2][i]["text"]
            assert sample["prompt_tokens"] == depths[2][i]["prompt_tokens"]
            assert sample["generated_tokens"] == depths[2][i]["generated_tokens"]
        roles = row["extra"]["roles"]
        assert set(roles) == {"sample", "continue", "critique", "correct"}
        assert sum(r["generated_tokens"] for r in roles.values()) == sum(
            s["generated_tokens"] for s in row["samples"]
        )
    assert sum(s["prompt_tokens"] for r in rows for s in r["samples"]) == llm.usage.prompt_tokens_all


def test_carry_forward_keeps_an_answer_when_the_correction_has_none(tmp_path, problems):
    script = {
        "seeded": True,
        "script": {
            "act as a corrector": ["I am not sure."],
            "act as a strict critic": ["fine"],
            "Continue working": ["still thinking"],
            "": ["so the answer is \\boxed{4}"],
        },
    }
    rows, _, _, _ = refine(problems, tmp_path / "on", script=script, n=2, depth=2, carry_forward=True)
    assert {d["source"] for r in rows for d in r["extra"]["depths"][2]} == {"previous"}
    assert {s["text"] for r in rows for s in r["samples"]} == {"so the answer is \\boxed{4}"}
    rows, _, _, _ = refine(problems, tmp_path / "off", script=script, n=2, depth=2, carry_forward=False)
    assert {s["text"] for r in rows for s in r["samples"]} == {"I am not sure."}


def test_variants_share_the_first_continue_call(tmp_path, problems):
    cache = RequestCache(tmp_path / "requests.sqlite")
    refine(problems, cache, n=2, depth=1, critic="model")
    _, sent, _, _ = refine(problems, cache, n=2, depth=1, critic="affirm")
    assert {r.tag.rsplit("/", 1)[-1] for r in sent} == {"correct"}


def test_depth_zero_is_majority(tmp_path, problems):
    rows, sent, calls, _ = refine(problems, tmp_path, n=2, depth=0)
    assert calls == [2 * len(problems)] and all(len(r["extra"]["depths"]) == 1 for r in rows)


def test_unknown_critic_is_refused(tmp_path, problems):
    with pytest.raises(ValueError, match="unknown critic"):
        refine(problems, tmp_path, critic="oracle")


@pytest.mark.slow
def test_refine_runs_on_a_real_model(tmp_path, problems, llamacpp_smollm2, smollm2_manifest):
    llm = CachedLLM(
        lambda: llamacpp_smollm2, "llamacpp", smollm2_manifest, RequestCache(tmp_path / "requests.sqlite")
    )
    roles = {role: {"max_tokens": 24} for role in ("continue", "critique", "correct")}
    cfg = method_cfg("refine", n=2, depth=1, sampling={"max_tokens": 24}, roles=roles)
    rows = METHODS.get("refine")(problems[:1], cfg, llm, ctx())
    [row] = rows
    assert len(row["samples"]) == 2 and len(row["extra"]["depths"]) == 2
    assert llm.usage.requests == 2 * 4
    later = row["extra"]["roles"]["correct"]
    assert later["prompt_tokens"] > later["generated_tokens"] > 0
    assert 0 <= later["cached_prompt_tokens"] <= later["prompt_tokens"]


def test_role_max_tokens_default_to_the_sampling_block(tmp_path, problems):
    roles = {"continue": {"max_tokens": None}, "critique": {"max_tokens": 7}, "correct": {"max_tokens": None}}
    _, sent, _, _ = refine(problems, tmp_path, n=2, depth=1, roles=roles)
    limits = {r.tag.rsplit("/", 1)[-1]: r.sampling.max_tokens for r in sent if "/d" in r.tag}
    base = method_cfg("refine")["sampling"]["max_tokens"]
    assert limits == {"continue": base, "critique": 7, "correct": base}
    seeds = [r.sampling.seed for r in sent]
    assert len(set(seeds)) == len(seeds)  # every call of every rollout has its own seed


def test_random_critic_length_follows_the_critique_budget():
    from retrace.methods.refine import random_critic_words

    cfg = method_cfg("refine")
    assert random_critic_words({**cfg, "roles": {"critique": {"max_tokens": 48}}}) == 36
    assert random_critic_words({**cfg, "roles": {"critique": {"max_tokens": 1024}}}) == 768
    assert random_critic_words({**cfg, "random_critic_words": 60}) == 60


class _Waves:
    """The engine seen as a synchronous batcher: no submit, every ready request in one
    `generate` call, i.e. each turn of all rollouts together (the turn-barrier schedule)."""

    def __init__(self, engine):
        self.engine, self.device = engine, engine.device

    def submit(self, request):
        return None

    def batch_size(self):
        return 10_000

    def generate(self, requests):
        return self.engine.generate(requests)


@pytest.mark.slow
def test_per_rollout_and_turn_barrier_schedules_give_identical_rows(
    tmp_path, problems, llamacpp_smollm2_det, smollm2_manifest
):
    """Deterministic mode on SmolLM2: the per-rollout scheduler (requests submitted as each
    rollout is ready) reproduces the turn-barrier schedule byte for byte. One round: each turn
    here re-prefills its whole history (no KV reuse), so a second round tripled the cost; the
    order of two rounds is checked on the scripted twin (tests/unit/test_refine_schedule.py)."""
    roles = {role: {"max_tokens": 16} for role in ("continue", "critique", "correct")}
    cfg = method_cfg("refine", n=2, depth=1, sampling={"max_tokens": 16}, roles=roles)
    rows = {}
    for name, engine in (("per_rollout", llamacpp_smollm2_det), ("barrier", _Waves(llamacpp_smollm2_det))):
        llm = CachedLLM(lambda: engine, "llamacpp", smollm2_manifest, RequestCache(tmp_path / name))
        rows[name] = METHODS.get("refine")(problems[:1], cfg, llm, ctx(3))
    strip = lambda rs: [
        {**r, "samples": [{k: v for k, v in s.items() if k != "latency_s"} for s in r["samples"]]} for r in rs
    ]
    assert strip(rows["per_rollout"]) == strip(rows["barrier"])
    assert len({s["text"] for r in rows["barrier"] for s in r["samples"]}) > 1  # real, varied text
