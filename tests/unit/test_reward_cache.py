"""Reward scores in the request cache (retrace.engine.reward_cache): an RM@N job killed
mid-scoring and rerun rescores nothing already scored, and one that finds every score never
loads the reward model. On the tiny random classifier of test_scorers (no hub, CPU)."""

from __future__ import annotations

import pytest
from test_scorers import PROBLEM, hf_scorer, tiny_models  # noqa: F401  (a fixture)

from retrace.engine.hf_reward import memory_map
from retrace.engine.reward_cache import reward_key
from retrace.engine.scorers import ScoreItem
from retrace.store.cache import RequestCache
from retrace.util.records import Problem

ITEMS = [ScoreItem(PROBLEM, f"step {i}\n\nso \\boxed{{{i}}}") for i in range(7)]


class Killed(Exception):
    pass


def counting(scorer, scored: list, kill_after: int | None = None):
    """Record the items each forward pass reads; raise Killed once `kill_after` batches ran."""
    real = scorer.score_batch

    def score_batch(batch):
        if kill_after is not None and len(scored) >= kill_after:
            raise Killed
        scored.append([it.solution for it in batch])
        return real(batch)

    scorer.score_batch = score_batch
    return scorer


def test_a_killed_scoring_job_rescoring_nothing_already_scored(tiny_models, tmp_path):
    folder = tiny_models["classifier"]
    plain = [s.value for s in hf_scorer(folder, "classifier").score(ITEMS)]  # no cache
    first: list = []
    killed = counting(hf_scorer(folder, "classifier"), first, kill_after=2)
    killed.cache = RequestCache(tmp_path / "cache", job="rm-first")
    with pytest.raises(Killed):
        killed.score(ITEMS)
    done = {s for batch in first for s in batch}
    assert len(done) == 4  # two batches of two were published before the kill

    again: list = []
    rerun = counting(hf_scorer(folder, "classifier"), again)
    rerun.cache = RequestCache(tmp_path / "cache", job="rm-rerun")
    scores = rerun.score(ITEMS)
    rescored = {s for batch in again for s in batch}
    assert rescored == {it.solution for it in ITEMS} - done  # only the missing three
    assert [s.value for s in scores] == pytest.approx(plain, abs=1e-6)
    assert all(s.key for s in scores) and len({s.key for s in scores}) == len(ITEMS)


def test_a_job_that_finds_every_score_never_loads_the_reward_model(tiny_models, tmp_path):
    folder = tiny_models["classifier"]
    scorer = hf_scorer(folder, "classifier", params=1234)
    scorer.cache = RequestCache(tmp_path / "cache", job="a")
    values = [s.value for s in scorer.score(ITEMS)]
    again = hf_scorer(folder, "classifier", params=1234)
    again.cache = RequestCache(tmp_path / "cache", job="b")
    assert [s.value for s in again.score(ITEMS)] == values
    assert again.model is None  # nothing missing: the weights were never loaded
    assert again.identity()["model"] == scorer.identity()["model"] and again.identity()["params"] == 1234


def test_the_key_names_the_reward_model_its_settings_the_question_and_the_solution():
    item = ScoreItem(PROBLEM, "\\boxed{5}")
    rm = {"model": "hub:Qwen/Qwen2.5-Math-RM-72B@a791b81", "kind": "classifier"}
    key = reward_key(rm, item)
    assert key == reward_key(dict(rm), ScoreItem(PROBLEM, "\\boxed{5}"))
    assert key != reward_key({**rm, "model": "hub:Qwen/Qwen2.5-Math-RM-72B@0000000"}, item)
    assert key != reward_key({**rm, "kind": "prm"}, item)
    assert key != reward_key(rm, ScoreItem(PROBLEM, "\\boxed{6}"))
    assert key != reward_key(rm, ScoreItem(Problem("p1", "What is 2+4?", "6"), "\\boxed{5}"))


def test_the_reward_model_is_kept_off_the_policys_gpus():
    gib = 2**30
    assert memory_map(2, [80 * gib] * 3) == {1: int(72 * gib), 2: int(72 * gib)}  # GPU 0: vLLM's
    assert memory_map(0, [80 * gib] * 3) == {} and memory_map(4, [80 * gib] * 3) == {}


def test_an_rm_at_n_run_killed_mid_scoring_resumes_where_it_stopped(tiny_models, tmp_path, monkeypatch):
    """RM@N (retrace.methods.best_of_n) with hf_reward through the job's CachedLLM: the scorer
    shares the job's request cache, so the rerun of a killed run scores only what is missing
    and writes the rows an uninterrupted run writes."""
    from fake_backend import method_cfg, scripted_llm, smoke_math_problems
    from test_methods import ANSWERS, ctx

    from retrace.engine.hf_reward import HFReward
    from retrace.util.registry import METHODS

    problems = smoke_math_problems(3)
    scorer = {"name": "hf_reward", "path": str(tiny_models["classifier"]), "kind": "classifier"}
    cfg = method_cfg("best_of_n", scorer={**scorer, "device": "cpu", "dtype": "float32", "batch_size": 2})
    real, scored, kill_after = HFReward.score_batch, [], None

    def counted(self, batch):
        if len(scored) == kill_after:
            raise Killed
        scored.append(len(batch))
        return real(self, batch)

    monkeypatch.setattr(HFReward, "score_batch", counted)
    clean, _ = scripted_llm(tmp_path / "clean", ANSWERS)
    expected = METHODS.get("best_of_n")(problems, cfg, clean, ctx(seed=2))
    total, scored[:] = sum(scored), []
    kill_after = 2
    first, _ = scripted_llm(tmp_path / "run", ANSWERS)
    with pytest.raises(Killed):
        METHODS.get("best_of_n")(problems, cfg, first, ctx(seed=2))
    assert sum(scored) == 4
    kill_after, scored[:] = None, []
    again, _ = scripted_llm(tmp_path / "run", ANSWERS)
    rows = METHODS.get("best_of_n")(problems, cfg, again, ctx(seed=2))
    assert sum(scored) == total - 4  # nothing scored twice
    flat = [v for r in rows for v in r["extra"]["scores"]]
    assert flat == pytest.approx([v for r in expected for v in r["extra"]["scores"]], abs=1e-6)
    assert [r["extra"]["chosen"] for r in rows] == [r["extra"]["chosen"] for r in expected]
