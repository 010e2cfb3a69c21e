"""Rejection paths through a fake LLM: Algorithm 1's stopping rule, max_turns, sampling per turn."""
from retrace.discriminator import loop
from retrace.drr import reasoner
from tests.unit.drr_fakes import PROBLEMS, TurnLLM, cfg


def test_distillation_stops_at_the_first_correct_answer_or_max_turns():
    llm = TurnLLM({"number 0": ["1"], "number 1": ["0", "2", "1"], "number 2": ["0"], "number 3": ["3", "1"]})
    c = cfg()
    paths = reasoner.rejection_paths(PROBLEMS, llm, c, 0, 4, stop=lambda p, t: t["letter"] == p.gold)
    assert [len(paths[p.id]["turns"]) for p in PROBLEMS] == [1, 3, 4, 2]
    # the same traces as Algorithm 1 (loop.distil) over the stored replies
    for p in PROBLEMS:
        turns = iter(paths[p.id]["turns"])
        attempts = loop.distil(p.question, lambda q, ctx: (lambda t: (t["answer"], t["rationale"]))(next(turns)),
                               lambda a: a == "1", 4)
        assert [a.answer for a in attempts] == [t["answer"] for t in paths[p.id]["turns"]]
    assert paths["t/q2"]["turns"][-1]["letter"] == "A"  # never right: stopped by max_turns


def test_inference_paths_run_all_turns_and_reprompt_with_history():
    llm = TurnLLM()
    paths = reasoner.rejection_paths(PROBLEMS[:2], llm, cfg(), 0, 5)
    assert all(len(p["turns"]) == 5 for p in paths.values())
    last = paths["t/q0"]["turns"][4]["messages"][1]["content"]
    assert last.count("Wrong Answer! Try again.") == 4
    # batched: one generate call per turn for all questions
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
    a = (reasoner.rejection_paths(PROBLEMS, sep, c, 0, 2), reasoner.abstain_answers(PROBLEMS, sep, c, 0),
         reasoner.selfcritic_answers(PROBLEMS, sep, c, 0))
    merged = TurnLLM({"number 1": ["none of the above", "1"]})
    calls = []
    orig = merged.generate
    merged.generate = lambda reqs: calls.append(len(reqs)) or orig(reqs)
    b = reasoner.eval_generations(PROBLEMS, merged, c, 0, 2)
    assert sorted(map(repr, sep.requests)) == sorted(map(repr, merged.requests))
    assert calls == [12, 8, 4]  # rounds: path+abstain+critic, path+critic, critic
    strip = lambda d: {k: {kk: vv for kk, vv in v.items() if kk != "key"} if "key" in v else v for k, v in d.items()}
    assert strip(a[1]) == strip(b[1]) and a[2]["t/q1"]["letter"] == b[2]["t/q1"]["letter"]
    assert [t["answer"] for t in a[0]["t/q1"]["turns"]] == [t["answer"] for t in b[0]["t/q1"]["turns"]]
