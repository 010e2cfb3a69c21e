"""The simulated engine (backends/simulated.py): planted correctness, seed structure, tokens."""

from __future__ import annotations

import pytest

from retrace.store.data import write_problems
from retrace.tasks._math import last_boxed
from retrace.util.records import Message, Problem, Request, Sampling
from retrace.util.registry import BACKENDS

MANIFEST = {"name": "sim-model"}


@pytest.fixture()
def problems(tmp_path):
    path = tmp_path / "problems.jsonl"
    write_problems(
        path, [Problem(id=f"q{i}", question=f"What is {i}+1?", gold=str(i + 1)) for i in range(400)]
    )
    return path


def engine(problems, label="majority", **extra):
    settings = {"problems": str(problems), "dataset": "d", "label": label, "batch_size": 8, **extra}
    return BACKENDS.get("simulated")(MANIFEST, settings)


def requests(seed: int, temperature: float, n: int = 400) -> list[Request]:
    sampling = lambda: Sampling(temperature=temperature, seed=seed, max_tokens=4096)
    return [
        Request(
            messages=(Message("user", f"What is {i}+1?"),), sampling=sampling(), tag=f"q{i}#0", sample_index=0
        )
        for i in range(n)
    ]


def test_temperature_zero_seeds_are_identical(problems):
    sim = engine(problems)
    texts = [[c.text for c in sim.generate(requests(seed, 0.0))] for seed in (0, 1, 2)]
    assert texts[0] == texts[1] == texts[2]
    sampled = [[c.text for c in sim.generate(requests(seed, 0.7))] for seed in (0, 1)]
    assert sampled[0] != sampled[1]


def test_planted_effect_raises_accuracy_by_its_points(problems, tmp_path):
    effects = tmp_path / "effects.yaml"
    effects.write_text("effects:\n  - {label: refine, points: 20, datasets: [d]}\n")
    acc = {}
    for label in ("majority", "refine"):
        sim = engine(problems, label, effects=str(effects))
        done = sim.generate(requests(0, 0.7))
        acc[label] = sum(last_boxed(c.text) == str(i + 1) for i, c in enumerate(done)) / len(done)
    assert acc["refine"] - acc["majority"] == pytest.approx(0.20, abs=0.08)
    assert 0.25 <= acc["majority"] <= 0.55  # base_accuracy 0.4


def test_tokens_are_drawn_and_capped(problems):
    sim = engine(problems)
    short = [Request(messages=(Message("user", "x"),), sampling=Sampling(max_tokens=5), tag="q1")]
    [c] = sim.generate(short)
    assert c.generated_tokens == 5 and c.finish_reason == "length"
    counts = {c.generated_tokens for c in sim.generate(requests(0, 0.7, 50))}
    assert len(counts) > 10 and all(0 < t < 4096 for t in counts)


def test_identity_marks_the_cache_as_simulated():
    ident = BACKENDS.get("simulated").identity(MANIFEST, {"label": "refine"})
    assert ident["backend"] == "simulated" and ident["simulated"] is True


def test_unknown_question_is_one_clear_error(problems):
    from retrace.backends.base import BackendError

    with pytest.raises(BackendError, match="names no problem"):
        engine(problems).generate([Request(messages=(), sampling=Sampling(), tag="nope#0")])


def test_report_banner_marks_simulated_numbers():
    from retrace.report.html import is_simulated

    assert is_simulated([{"score_file": "results/scores/m/simulated/d/refine/seed0.json"}], [])
    assert is_simulated([], [{"engine": "simulated"}])
    assert not is_simulated(
        [{"score_file": "results/scores/m/vllm/d/refine/seed0.json"}], [{"engine": "vllm"}]
    )


def test_method_tags_resolve_to_their_problem_even_when_ids_hold_slashes(tmp_path):
    path = tmp_path / "problems.jsonl"
    write_problems(path, [Problem(id="olympiadbench/1820", question="2+2?", gold="4")])
    sim = engine(path)
    sampling = Sampling(temperature=0.7, seed=0, max_tokens=4096)
    # greedy, sampling, refinement and beam-search tags (methods/*.py)
    for tag in (
        "olympiadbench/1820",
        "olympiadbench/1820#3",
        "olympiadbench/1820#3/d1/critique",
        "olympiadbench/1820:step0:beam1#2",
    ):
        [c] = sim.generate([Request(messages=(Message("user", "2+2?"),), sampling=sampling, tag=tag)])
        assert last_boxed(c.text) in ("4", "-100003"), tag


def test_a_judge_gets_a_coin_not_the_answer(problems):
    """Verifier requests (tag judge:<id>) read Yes or No, about half each, one token, whatever
    the judged text's correctness: RM@N and beam search get no planted verifier skill."""
    sim = engine(problems)
    judge = Sampling(temperature=0.0, seed=0, max_tokens=1, logprobs=10)
    asked = [
        Request(
            messages=(Message("user", f"Is {i + 1} right for {i}+1?"),), sampling=judge, tag=f"judge:q{i}"
        )
        for i in range(200)
    ]
    done = sim.generate(asked)
    said = [c.text for c in done]
    assert set(said) == {"Yes", "No"} and 0.35 < said.count("Yes") / len(said) < 0.65
    assert all(c.generated_tokens == 1 and c.finish_reason == "stop" for c in done)
    assert [c.text for c in sim.generate(asked)] == said  # a function of the judged text


def test_a_simulated_model_has_no_weights(tmp_path):
    from retrace.store import models

    cfg = {"name": "m", "params": 8_000_000_000, "source": {"kind": "simulated"}}
    manifest, sources = models.materialise(cfg, tmp_path)
    assert manifest["simulated"] is True and sources == [] and models.weight_files(manifest) == []
    assert manifest["fingerprint"] != models.materialise({**cfg, "name": "n"}, tmp_path)[0]["fingerprint"]


def test_token_counts_grow_with_the_history_as_an_engine_would_count_them(problems):
    """A refinement history carries earlier answers: the next prompt's tokens are the last
    prompt's plus what was generated plus the new words, so prefix reuse never exceeds the prompt."""
    sim = engine(problems)
    first = Request(
        messages=(Message("user", "What is 1+1?"),), sampling=Sampling(temperature=0.7), tag="q1#0"
    )
    [c] = sim.generate([first])
    assert c.generated_tokens > 50 and "tokens)" in c.text  # lognormal around 300, declared in the text
    history = first.messages + (Message("assistant", c.text), Message("user", "Check it step by step."))
    [d] = sim.generate(
        [Request(messages=history, sampling=Sampling(temperature=0.7), tag="q1#0/d1/critique")]
    )
    assert d.prompt_tokens == c.prompt_tokens + c.generated_tokens + 5
