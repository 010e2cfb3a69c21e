"""ART's methods and baselines on the scripted backend: self-consistency draws k programs
with k seeds, AutoCoT picks one demonstration per question cluster."""
from __future__ import annotations

from fake_backend import engine_requests, scripted_llm
from retrace.art import plan
from retrace.art.baselines import METHOD_FNS, Context
from retrace.methods.base import derive_seed
from retrace.records import Problem

DEMO = "Input: 2 plus 2\nQ1: [EOQ]\nAns: 4"


class Exact:
    kind = "exact"

    def extract_answer(self, text, problem):
        return text.strip()

    def is_correct(self, answer, problem):
        return answer == problem.gold


def _ctx(llm, problems, pool=(), **settings) -> Context:
    return Context(llm, Exact(), list(problems), list(pool), "Add the numbers.",
                   {**plan.SETTINGS, **settings}, seed=7, demos=[DEMO])


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
