"""Rejection paths through a fake LLM: Algorithm 1's stopping rule, max_turns, sampling per turn;
and their scheduling as per-question tasks (scripted engine, and one slow check on SmolLM2)."""

import hashlib
import json
import threading
from concurrent.futures import Future

import pytest
from fake_backend import engine_requests, manifest, scripted_llm

from retrace.backends.scripted import ScriptedBackend
from retrace.drr import loop, reasoner
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from tests.unit.drr_fakes import PROBLEMS, TurnLLM, cfg


def test_distillation_stops_at_the_first_correct_answer_or_max_turns():
    llm = TurnLLM({"number 0": ["1"], "number 1": ["0", "2", "1"], "number 2": ["0"], "number 3": ["3", "1"]})
    c = cfg()
    paths = reasoner.rejection_paths(PROBLEMS, llm, c, 0, 4, stop=lambda p, t: t["letter"] == p.gold)
    assert [len(paths[p.id]["turns"]) for p in PROBLEMS] == [1, 3, 4, 2]
    # the same traces as Algorithm 1 (loop.distil) over the stored replies
    for p in PROBLEMS:
        turns = iter(paths[p.id]["turns"])
        attempts = loop.distil(
            p.question,
            lambda q, ctx: (lambda t: (t["answer"], t["rationale"]))(next(turns)),
            lambda a: a == "1",
            4,
        )
        assert [a.answer for a in attempts] == [t["answer"] for t in paths[p.id]["turns"]]
    assert paths["t/q2"]["turns"][-1]["letter"] == "A"  # never right: stopped by max_turns


def test_inference_paths_run_all_turns_and_reprompt_with_history():
    llm = TurnLLM()
    paths = reasoner.rejection_paths(PROBLEMS[:2], llm, cfg(), 0, 5)
    assert all(len(p["turns"]) == 5 for p in paths.values())
    last = paths["t/q0"]["turns"][4]["messages"][1]["content"]
    assert last.count("Wrong Answer! Try again.") == 4
    assert len(llm.requests) == 10


def test_sampling_follows_appendix_b():
    c = cfg()
    s0, s1 = reasoner.turn_sampling(c, 0, 0, "q"), reasoner.turn_sampling(c, 1, 0, "q")
    assert (s0.temperature, s0.top_p, s1.temperature, s1.top_p) == (0.1, 0.9, 0.6, 0.7)
    g = reasoner.turn_sampling(cfg(strategy="gradual"), 0, 0, "q")
    assert (g.temperature, g.top_p) == (0.6, 0.9)
    assert s0.seed != s1.seed and s0.seed == reasoner.turn_sampling(c, 0, 0, "q").seed


def test_baselines_abstain_and_selfcritic():
    llm = TurnLLM({"number 0": ["none of the above"]})
    ab = reasoner.abstain_answers(PROBLEMS[:2], llm, cfg(), 0)
    assert ab["t/q0"]["abstain"] and not ab["t/q1"]["abstain"]
    assert llm.requests[0].sampling.temperature == 0.1
    sc = reasoner.selfcritic_answers(PROBLEMS[:1], TurnLLM(), cfg(), 0)
    assert len(sc["t/q0"]["steps"]) == 3 and sc["t/q0"]["steps"][2]["messages"][-1]["role"] == "user"


def test_merged_eval_rounds_send_the_same_requests_in_fewer_calls():
    c = cfg()
    sep = TurnLLM({"number 1": ["none of the above", "1"]})
    a = (
        reasoner.rejection_paths(PROBLEMS, sep, c, 0, 2),
        reasoner.abstain_answers(PROBLEMS, sep, c, 0),
        reasoner.selfcritic_answers(PROBLEMS, sep, c, 0),
    )
    merged = TurnLLM({"number 1": ["none of the above", "1"]})
    calls = []
    orig = merged.generate
    merged.generate = lambda reqs: calls.append(len(reqs)) or orig(reqs)
    b = reasoner.eval_generations(PROBLEMS, merged, c, 0, 2)
    assert sorted(map(repr, sep.requests)) == sorted(map(repr, merged.requests))
    assert calls == [12, 8, 4]  # a synchronous engine's waves: path+abstain+critic, path+critic, critic
    strip = lambda d: {
        k: {kk: vv for kk, vv in v.items() if kk != "key"} if "key" in v else v for k, v in d.items()
    }
    assert strip(a[1]) == strip(b[1]) and a[2]["t/q1"]["letter"] == b[2]["t/q1"]["letter"]
    assert [t["answer"] for t in a[0]["t/q1"]["turns"]] == [t["answer"] for t in b[0]["t/q1"]["turns"]]


# ---------------------------------------------------------------- scheduling (retrace.engine.scheduler)
# Replies chosen by (seed, sample_index), so the text of a request never depends on the order
# in which an engine finishes requests.
SCRIPT = {
    "seeded": True,
    "script": {
        "": [
            "Answer: 0 Rationale: first",
            "Answer: 1 Rationale: so (1)",
            "Answer: none of the above Rationale: unsure",
            "I think (2)",
        ]
    },
}
# Frozen from the round-synchronised eval_generations (one llm.generate per round: path turn r,
# Abstain at r = 0, Self-Critic step r) on PROBLEMS[:2], seed 5, 4 turns: tag -> key[:16] and
# sha256 of the returned structures as JSON (key order included). A change that is meant to
# alter the requests (prompt wording, DRR defaults, key scheme) refreezes these from the
# values in the failure message.
ROUND_KEYS = {
    "t/q0#turn0": "5b4acc4cac945f2d",
    "t/q1#turn0": "694c71b1713df761",
    "t/q0#abstain": "4736c2b8e5016886",
    "t/q1#abstain": "cd2081f1d3fbd215",
    "t/q0#selfcritic0": "0346020e07a784d0",
    "t/q1#selfcritic0": "04e43c15a22228e9",
    "t/q0#turn1": "9d4bcc9c7be93525",
    "t/q1#turn1": "d00e4a2d8c009220",
    "t/q0#selfcritic1": "1bdf86b93d4b5134",
    "t/q1#selfcritic1": "5641e797ff1c4718",
    "t/q0#turn2": "d1d4f13b9ee524d2",
    "t/q1#turn2": "ab62a6f3d3d5690f",
    "t/q0#selfcritic2": "23b757f829c3b059",
    "t/q1#selfcritic2": "fb6cd0a7d69feadc",
    "t/q0#turn3": "637feeb9e803bb65",
    "t/q1#turn3": "5f8c2ea43eecb8b4",
}
ROUND_EVAL = "88cfa4f7e40927175463b8dcf527db292dc7cdba6f13bab15adb647bb58d059c"
ROUND_DISTIL = "69f4d2eda7b74bca517fa4159dbbb47009157abf69490f90a94c2bbcefb46878"


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj).encode()).hexdigest()


@pytest.mark.parametrize("mode", ["wave", "async"])
def test_tasks_send_the_requests_and_return_the_structures_of_the_round_based_code(tmp_path, mode):
    """Same requests, same cache keys, same paths/abstain/critic dicts as the round-synchronised
    code, whether the engine batches synchronously (waves) or finishes out of order (async)."""
    engine = {**SCRIPT, **({"async": True} if mode == "async" else {})}
    llm, engines = scripted_llm(tmp_path / "eval", engine)
    out = reasoner.eval_generations(PROBLEMS[:2], llm, cfg(), 5, 4)
    keys = {r.tag: llm.key(r)[:16] for r in engine_requests(engines)}
    assert (keys, digest(out)) == (ROUND_KEYS, ROUND_EVAL), f"now: {keys} {digest(out)}"
    llm, _ = scripted_llm(tmp_path / "distil", engine)
    paths = reasoner.rejection_paths(PROBLEMS[:2], llm, cfg(), 5, 4, stop=lambda p, t: t["letter"] == p.gold)
    assert [len(p["turns"]) for p in paths.values()] == [1, 4]  # q0 right at once, q1 never
    assert digest(paths) == ROUND_DISTIL, f"now: {digest(paths)}"


class SlowFirstTurn(ScriptedBackend):
    """The scripted engine in async mode, except that request `slow` comes back only once
    request `until` was submitted, or after 5 s (code with a round barrier never submits
    `until` before `slow` is back, so it waits them out and the order shows it)."""

    def __init__(self, slow: str, until: str):
        super().__init__(manifest(), {**SCRIPT, "async": True})
        self.slow, self.until, self.log = slow, until, []
        self.until_sent = threading.Event()

    def submit(self, request):
        self.log.append(("submit", request.tag))
        if request.tag == self.until:
            self.until_sent.set()
        inner = super().submit(request)
        if request.tag != self.slow:
            return inner
        outer = Future()

        def hold():
            self.until_sent.wait(timeout=5)
            completion = inner.result()
            self.log.append(("back", request.tag))
            outer.set_result(completion)

        threading.Thread(target=hold, daemon=True).start()
        return outer


def test_a_question_moves_on_without_waiting_for_a_slow_one(tmp_path):
    """No round barrier: q1's second turn reaches the engine while q0's first is still running."""
    engine = SlowFirstTurn(slow="t/q0#turn0", until="t/q1#turn1")
    llm = CachedLLM(lambda: engine, "scripted", manifest(), RequestCache(tmp_path / "c", job="t"))
    out = reasoner.eval_generations(PROBLEMS[:2], llm, cfg(), 5, 4)
    assert engine.log.index(("submit", "t/q1#turn1")) < engine.log.index(("back", "t/q0#turn0"))
    assert digest(out) == ROUND_EVAL  # and the slow reply changed nothing


@pytest.mark.slow
def test_task_and_round_barrier_schedules_give_identical_eval_generations(
    tmp_path, llamacpp_smollm2_det, smollm2_manifest
):
    """Deterministic mode on SmolLM2: per-question tasks (each request submitted as soon as its
    question is ready) reproduce the round-barrier schedule (waves) byte for byte."""
    from test_refine import _Waves

    c = cfg(max_tokens=16)
    out = {}
    for name, engine in (("tasks", llamacpp_smollm2_det), ("barrier", _Waves(llamacpp_smollm2_det))):
        llm = CachedLLM(lambda: engine, "llamacpp", smollm2_manifest, RequestCache(tmp_path / name))
        out[name] = reasoner.eval_generations(PROBLEMS[:2], llm, c, 3, 3)
    assert json.dumps(out["tasks"]) == json.dumps(out["barrier"])
    paths, _, critic = out["tasks"]
    texts = {t["text"] for p in paths.values() for t in p["turns"]} | {
        s["text"] for r in critic.values() for s in r["steps"]
    }
    assert len(texts) > 1  # real, varied text
