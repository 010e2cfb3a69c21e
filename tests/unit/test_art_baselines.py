"""ART's methods and baselines on the scripted backend: self-consistency draws k programs
with k seeds, AutoCoT picks one demonstration per question cluster."""

from __future__ import annotations

from fake_backend import engine_requests, scripted_llm

from retrace.art import plan
from retrace.art.baselines import METHOD_FNS, Context
from retrace.methods.base import derive_seed
from retrace.util.records import Problem

DEMO = "Input: 2 plus 2\nQ1: [EOQ]\nAns: 4"


class Exact:
    kind = "exact"

    def extract_answer(self, text, problem):
        return text.strip()

    def is_correct(self, answer, problem):
        return answer == problem.gold


def _ctx(llm, problems, pool=(), **settings) -> Context:
    return Context(
        llm,
        Exact(),
        list(problems),
        list(pool),
        "Add the numbers.",
        {**plan.SETTINGS, **settings},
        seed=7,
        demos=[DEMO],
    )


def test_self_consistency_samples_each_get_their_own_seed(tmp_path):
    llm, engines = scripted_llm(tmp_path, {"script": [" [EOQ]\nAns: 5"]})
    problems = [Problem("p1", "2 plus 3", "5"), Problem("p2", "1 plus 4", "5")]
    rows = METHOD_FNS["art_sc"](_ctx(llm, problems, sc_k=3))
    reqs = engine_requests(engines)
    assert len(reqs) == 6 and all(r["answer"] == "5" for r in rows)
    seeds = {(r.prompt.split("Input: ")[-1].split("\n")[0], r.sample_index): r.sampling.seed for r in reqs}
    # the spine's per-sample seed: (run seed, problem id, sample index)
    assert seeds == {(p.question, j): derive_seed(7, p.id, j) for p in problems for j in range(3)}
    assert len(set(seeds.values())) == 6


def _vec(x, y):
    import numpy as np

    v = np.array([x, y], dtype=float)
    return v / np.linalg.norm(v)


def test_autocot_takes_one_demonstration_per_question_cluster(tmp_path, monkeypatch):
    from retrace.art import autocot as ac

    # two clusters of held-out questions: q0..q2 near (1, 0), q3..q5 near (0, 1); q1 and q4
    # sit nearest their centroids, q2 is the runner-up of the first cluster
    pos = {"q0": (1, 0.45), "q1": (1, 0.2), "q2": (1, 0.05), "q3": (0.3, 1), "q4": (0.1, 1), "q5": (-0.15, 1)}
    monkeypatch.setattr(ac, "embed", lambda texts: [_vec(*pos[t]) for t in texts])
    long_chain = "\n".join(f"step {i}" for i in range(7))  # 7 reasoning steps: over AutoCoT's 5
    script = {
        "Input: t1": " so 4.\nAns: 4",
        "Input: q1": f" {long_chain}\nAns: 1",
        "Input: q2": " q2 is two.\nAns: 2",
        "Input: q4": " q4 is four.\nAns: 4",
        "": " none\nAns: 0",
    }
    llm, engines = scripted_llm(tmp_path, {"script": script})
    pool = [Problem(q, q, "x") for q in pos]
    rows = METHOD_FNS["autocot"](_ctx(llm, [Problem("t1", "t1", "4")], pool, autocot_k=2))
    assert rows[0]["clusters"] == [["q1", "q2", "q0"], ["q4", "q3", "q5"]]
    # q1's chain was too long, so its cluster fell back to the next nearest question
    assert rows[0]["demos"] == ["q2", "q4"] and rows[0]["answer"] == "4"
    asked = [r.prompt.split("Input: ")[-1].split("\n")[0] for r in engine_requests(engines)]
    assert asked == ["q1", "q4", "q2", "t1"]  # rounds: nearest of each, then the runner-up
    final = engine_requests(engines)[-1].prompt
    assert (
        "Input: q2\nReasoning: Let's think step by step. q2 is two.\nAns: 2" in final
        and "Input: q0" not in final
    )


def test_autocot_random_selection_takes_seeded_random_questions_without_embedding(tmp_path, monkeypatch):
    """autocot_selection: random (ART §A.4: "randomly selected dataset examples"): no k-means,
    no embedding; the candidate lists are one seeded shuffle of the pool dealt round-robin,
    the same for the same seed and different for another."""
    import random

    from retrace.art import autocot as ac

    monkeypatch.setattr(ac, "embed", lambda texts: (_ for _ in ()).throw(AssertionError("embedded")))
    pool = [Problem(f"q{i}", f"q{i}", "x") for i in range(6)]
    llm, _ = scripted_llm(tmp_path, {"script": {"": " fine.\nAns: 1"}})
    rows = METHOD_FNS["autocot"](
        _ctx(llm, [Problem("t1", "t1", "1")], pool, autocot_k=2, autocot_selection="random")
    )
    order = [f"q{i}" for i in range(6)]
    random.Random(7).shuffle(order)  # the run seed of _ctx
    assert rows[0]["clusters"] == [order[0::2], order[1::2]]
    assert rows[0]["demos"] == [order[0], order[1]]  # the first candidate of each list passes
    assert ac.random_groups(6, 2, 7) != ac.random_groups(6, 2, 8)


def test_art_settings_refuse_an_unknown_autocot_selection():
    import pytest

    with pytest.raises(ValueError, match="settings.autocot_selection: 'means'; valid: kmeans, random"):
        plan.check({"models": ["m"], "backend": "llamacpp", "settings": {"autocot_selection": "means"}})


def test_autocot_heuristics():
    from retrace.art.autocot import passes

    assert passes("What is 2 plus 2?", "2 plus 2 is 4.", "4")
    assert not passes(" ".join(["word"] * 61), "ok.", "4")  # question over 60 tokens
    assert not passes("q", "\n".join("s" * 6), "4")  # 6 steps
    assert not passes("q", "fine.", None) and not passes("q", "", "4")


def test_autocot_clusters_real_minilm_embeddings_by_topic():
    from retrace.art.autocot import cluster

    texts = [
        "What is 46 plus 27?",
        "The cat sat on the warm mat and purred.",
        "What is 84 divided by 7?",
        "A dog barked at the cat in the garden.",
        "What is 12 times 9?",
    ]
    groups = cluster(texts, 2, seed=0)
    assert sorted(sorted(g) for g in groups) == [[0, 2, 4], [1, 3]]
    assert cluster(texts, 2, seed=0) == groups  # fixed seed: the same clusters every run
