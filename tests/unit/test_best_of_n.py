"""RM@N (retrace.methods.best_of_n): reuses the Maj@N rollouts, scores them, keeps the argmax."""

from __future__ import annotations

import pytest
from fake_backend import FINGERPRINT, engine_requests, scripted_llm
from judged_backend import is_judge, judged_llm
from test_methods import ANSWERS, ctx, method_cfg, problems  # noqa: F401 - fixture

from retrace.methods.best_of_n import argmax
from retrace.scoring.selection import chosen_correct
from retrace.store.cache import RequestCache
from retrace.util.registry import METHODS

JUDGE_BY_ANSWER = {str(i): i / 10 for i in range(10)}  # the judge likes larger answers


def judge_only(request):
    assert is_judge(request), f"a rollout reached the engine: {request.tag}"
    solution = request.messages[0].content.split("Solution:")[1]
    return JUDGE_BY_ANSWER[solution.split("boxed{")[1][0]]


def test_sampling_block_matches_majority():
    assert method_cfg("best_of_n")["sampling"] == method_cfg("majority")["sampling"]
    assert method_cfg("best_of_n")["n"] == method_cfg("majority")["n"]


def test_rollouts_come_from_the_majority_cache_and_only_the_judge_runs(tmp_path, problems):
    cache = RequestCache(tmp_path / "requests.sqlite")
    first, _ = scripted_llm(cache, ANSWERS)
    maj = METHODS.get("majority")(problems, method_cfg("majority"), first, ctx(seed=2))
    llm, engines = judged_llm(cache, judge_only)
    rows = METHODS.get("best_of_n")(problems, method_cfg("best_of_n"), llm, ctx(seed=2))
    sent = engine_requests(engines)
    # Equal rollout texts make equal judge requests: the engine sees each once.
    texts = {(r["problem_id"], s["text"]) for r in maj for s in r["samples"]}
    assert len(sent) == len(texts) and all(is_judge(r) for r in sent)
    for m, r in zip(maj, rows):
        assert [s["key"] for s in r["samples"]] == [s["key"] for s in m["samples"]]
        assert all(s["cache_hit"] for s in r["samples"])
        answers = [int(s["text"].split("boxed{")[1][0]) for s in r["samples"]]
        assert r["extra"]["scores"] == pytest.approx([a / 10 for a in answers])
        assert r["extra"]["chosen"] == answers.index(max(answers))
        assert r["extra"]["scorer"]["name"] == "llm_judge"
        assert r["extra"]["scorer"]["model"] == FINGERPRINT
        assert r["extra"]["compute"]["scorer"]["requests"] == len({s["text"] for s in r["samples"]})
        assert r["extra"]["compute"]["policy"]["generated_tokens"] == sum(
            s["generated_tokens"] for s in r["samples"]
        )


def test_argmax_breaks_ties_towards_the_first_sample():
    assert argmax([0.2, 0.9, 0.9, 0.1]) == 1 and argmax([0.5]) == 0


def test_chosen_correct_reads_the_chosen_sample(problems):
    from retrace.util.registry import TASKS

    task, p = TASKS.get("smoke_math"), problems[0]
    right, wrong = f"so \\boxed{{{p.gold}}}", "so \\boxed{-12345}"
    row = {"samples": [{"text": wrong}, {"text": right}, {"text": wrong}], "extra": {"chosen": 1}}
    assert chosen_correct(row, p, task) is True
    assert chosen_correct({**row, "extra": {"chosen": 0}}, p, task) is False
    assert chosen_correct({**row, "extra": {}}, p, task) is None  # not a selecting method
