"""score_generations on hand-made rows with a fake exact-match task."""

import pytest

from retrace.scoring.score import score_generations
from retrace.util.records import Problem


class FakeTask:
    """Answer = text after "ANSWER:"; exact string equivalence; raises on "BOOM"."""

    def extract_answer(self, text, problem):
        if "BOOM" in text:
            raise RuntimeError("a buggy task")
        head, sep, tail = text.rpartition("ANSWER:")
        return tail.strip() or None if sep else None

    def is_correct(self, answer, problem):
        return answer == problem.gold

    def same_answer(self, a, b):
        return a == b


def sample(text, i=0, prompt=10, cached=4, gen=5, reason="stop"):
    return {
        "index": i,
        "text": text,
        "finish_reason": reason,
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "generated_tokens": gen,
        "cache_hit": False,
        "key": f"k{i}",
    }


def row(pid, texts):
    return {
        "problem_id": pid,
        "method": "majority",
        "samples": [sample(t, i) for i, t in enumerate(texts)],
        "extra": {},
    }


PROBLEMS = {p: Problem(id=p, question="q", gold=g) for p, g in [("p1", "1"), ("p2", "2"), ("p3", "3")]}


def test_greedy_accuracy_and_totals():
    rows = [row("p1", ["ANSWER: 1"]), row("p2", ["ANSWER: 5"]), row("p3", ["no idea"])]
    s = score_generations(rows, PROBLEMS, FakeTask(), params=1000, n_boot=200)
    assert s["n_problems"] == 3 and s["n_samples"] == 3
    assert s["accuracy"]["value"] == pytest.approx(1 / 3)
    assert s["accuracy"]["ci_low"] <= 1 / 3 <= s["accuracy"]["ci_high"]
    assert list(s["maj@k"]) == [1] and s["pass@k"] == {1: pytest.approx(1 / 3)}
    assert s["tokens"] == {
        "prompt": 30,
        "cached_prompt": 12,
        "generated": 15,
        "per_problem_mean_generated": 5.0,
    }
    # one sample per problem shares no prefix: the structural price is the nominal one,
    # whatever the engine's cache happened to hold (its 12 cached tokens are kept apart)
    assert s["flops"] == {
        "nominal": 2 * 1000 * 45,
        "effective": 2 * 1000 * 45,
        "effective_engine": 2 * 1000 * 33,
        "effective_basis": "request structure",
    }
    assert s["finish_reasons"] == {"stop": 3}
    assert s["per_problem"][2] == {
        "id": "p3",
        "answers": [None],
        "sources": ["none"],
        "paths": ["none"],
        "truncated": [False],
        "correct": [False],
        "vote": None,
        "vote_correct": False,
    }


def test_majority_first_k_and_pass_at_k():
    # p1: right in the first 2 samples, then outvoted by "9"; p2: never right.
    rows = [
        row("p1", ["ANSWER: 1", "ANSWER: 1", "ANSWER: 9", "ANSWER: 9", "ANSWER: 9"]),
        row("p2", ["ANSWER: 0"] * 5),
    ]
    s = score_generations(rows, PROBLEMS, FakeTask(), params=1, n_boot=200)
    assert list(s["maj@k"]) == [1, 2, 4, 5]
    assert s["maj@k"][1]["value"] == 0.5 and s["maj@k"][2]["value"] == 0.5
    assert s["maj@k"][4]["value"] == 0.5  # 2 vs 2: tie goes to "1", seen first
    assert s["maj@k"][5]["value"] == 0.0
    assert s["accuracy"]["value"] == 0.0  # accuracy is maj@N
    assert s["pass@k"][1] == pytest.approx((2 / 5) / 2)
    assert s["pass@k"][5] == pytest.approx(0.5)
    assert s["per_problem"][0]["vote"] == "9"


def test_garbage_text_is_wrong_not_an_exception():
    rows = [row("p1", ["BOOM", "\x00\ufffd", "ANSWER: 1"])]
    rows[0]["samples"].append({**sample(None, 3), "text": None})
    s = score_generations(rows, PROBLEMS, FakeTask(), params=1, n_boot=50)
    pp = s["per_problem"][0]
    assert pp["answers"] == [None, None, "1", None]
    assert pp["correct"] == [False, False, True, False]
    assert pp["vote"] == "1" and pp["vote_correct"]
    # every sample without an answer counts, not only the two that raised
    assert (s["extract_errors"], s["extract_exceptions"]) == (3, 2)


def test_unknown_problem_is_named():
    with pytest.raises(ValueError, match="nope"):
        score_generations([row("nope", ["ANSWER: 1"])], PROBLEMS, FakeTask(), params=1)


def test_duplicate_and_empty_rows_refused():
    with pytest.raises(ValueError, match="p1"):
        score_generations([row("p1", ["x"]), row("p1", ["y"])], PROBLEMS, FakeTask(), 1)
    with pytest.raises(ValueError, match="no samples"):
        score_generations([row("p1", [])], PROBLEMS, FakeTask(), 1)
    with pytest.raises(ValueError):
        score_generations([], PROBLEMS, FakeTask(), 1)


def test_finish_reasons_counted():
    r = row("p1", ["ANSWER: 1", "ANSWER: 1"])
    r["samples"][1]["finish_reason"] = "length"
    s = score_generations([r], PROBLEMS, FakeTask(), params=1, n_boot=10)
    assert s["finish_reasons"] == {"length": 1, "stop": 1}


def test_selecting_methods_are_scored_on_their_choice_and_full_cost():
    # The vote would pick "5" (two of three); the scorer chose the lone right answer.
    rows = [row("p1", ["ANSWER: 5", "ANSWER: 1", "ANSWER: 5"])]
    rows[0]["extra"] = {
        "chosen": 1,
        "scorer": {"name": "llm_judge", "params": 10},
        "compute": {
            "policy": {"prompt_tokens": 100, "cached_prompt_tokens": 40, "generated_tokens": 50},
            "scorer": {"prompt_tokens": 30, "cached_prompt_tokens": 0, "generated_tokens": 3},
        },
    }
    s = score_generations(rows, PROBLEMS, FakeTask(), params=1000, n_boot=50)
    assert s["selection"] == "chosen by scorer" and s["accuracy"]["value"] == 1.0
    assert s["per_problem"][0]["vote_correct"] is False
    assert s["scorer"]["name"] == "llm_judge"
    # tokens come from extra.compute (pruned candidates and judge calls included), not samples
    assert s["tokens"]["prompt"] == 130 and s["tokens"]["generated"] == 53
    assert s["flops"]["nominal"] == 2 * 1000 * 150 + 2 * 10 * 33
    assert s["flops"]["effective"] == 2 * 1000 * 110 + 2 * 10 * 33
    assert s["flops"]["effective_basis"] == "engine cache"  # search structure is not recorded


def test_voting_methods_say_so_and_have_no_scorer():
    s = score_generations([row("p1", ["ANSWER: 1"])], PROBLEMS, FakeTask(), params=1, n_boot=20)
    assert s["selection"] == "plurality vote" and s["scorer"] is None


MATH = Problem(id="m", question="A box holds 6 eggs. How many eggs are in 5 boxes?", gold="30")


def math_row(texts, reasons=None):
    r = {
        "problem_id": "m",
        "method": "majority",
        "extra": {},
        "samples": [sample(t, i) for i, t in enumerate(texts)],
    }
    for s_, reason in zip(r["samples"], reasons or []):
        s_["finish_reason"] = reason
    return r


def test_paper_faithful_vote_counts_only_explicit_answers():
    from retrace.util.registry import TASKS

    task = TASKS.get("smoke_math")
    texts = [
        "The eggs in 5 boxes: The solution is correct.",
        "The eggs in 5 boxes: The solution is correct.",
        "6 x 5 = 30, so \\boxed{30}.",
    ]
    s = score_generations([math_row(texts)], {"m": MATH}, task, params=1, n_boot=10)
    pp = s["per_problem"][0]
    assert pp["sources"] == ["fallback", "fallback", "boxed"]
    assert pp["answers"] == [None, None, "30"] and pp["vote"] == "30" and s["accuracy"]["value"] == 1.0
    assert s["answer_sources"] == pytest.approx(
        {"boxed": 1 / 3, "statement": 0.0, "fallback": 2 / 3, "none": 0.0}
    )
    assert s["extract_errors"] == 2 and s["vote"].startswith("explicit")
    loose = score_generations([math_row(texts)], {"m": MATH}, task, params=1, n_boot=10, vote="any")
    assert loose["per_problem"][0]["vote"] == "5" and loose["accuracy"]["value"] == 0.0
    assert loose["vote"].startswith("any answer")


def test_truncated_box_is_no_answer_and_truncation_is_recorded():
    from retrace.util.registry import TASKS

    texts = ["6 x 5 = 30, so \\boxed{3", "\\boxed{30}"]
    s = score_generations(
        [math_row(texts, ["length", "stop"])], {"m": MATH}, TASKS.get("smoke_math"), params=1, n_boot=10
    )
    pp = s["per_problem"][0]
    assert pp["answers"] == [None, "30"] and pp["sources"] == ["none", "boxed"]
    assert pp["truncated"] == [True, False] and s["truncated_rate"] == 0.5
    with pytest.raises(ValueError, match="scoring.vote"):
        score_generations([math_row(texts)], {"m": MATH}, TASKS.get("smoke_math"), 1, vote="loose")


def test_results_columns_carry_source_rates_and_budget():
    from retrace.scoring.score import RESULT_COLUMNS, result_columns
    from retrace.util.registry import TASKS

    s = score_generations(
        [math_row(["\\boxed{30}", "5 boxes"], ["stop", "length"])],
        {"m": MATH},
        TASKS.get("smoke_math"),
        params=1,
        n_boot=10,
    )
    s["budget"] = {"solutions": 2, "tokens_per_solution": 64, "text": "N=2 x 64 tok"}
    cols = result_columns(s)
    assert tuple(cols) == RESULT_COLUMNS
    assert (cols["answer_boxed_rate"], cols["answer_fallback_rate"], cols["truncated_rate"]) == (
        0.5,
        0.5,
        0.5,
    )
    assert cols["extract_errors"] == 1 and cols["budget_tokens_per_solution"] == 64
    assert cols["mean_generated_tokens_per_solution"] == 5.0


def test_a_scorer_of_unknown_size_is_reported_unpriced_not_free():
    rows = [row("p1", ["ANSWER: 1", "ANSWER: 1"])]
    rows[0]["extra"] = {
        "chosen": 0,
        "scorer": {"name": "hf_reward", "params": None},
        "compute": {
            "policy": {"prompt_tokens": 10, "cached_prompt_tokens": 0, "generated_tokens": 5},
            "scorer": {"prompt_tokens": 40, "cached_prompt_tokens": 0, "generated_tokens": 0},
        },
    }
    s = score_generations(rows, PROBLEMS, FakeTask(), params=100, n_boot=10)
    assert s["flops"]["nominal"] == 2 * 100 * 15 and s["flops"]["unpriced_tokens"] == 40


def test_a_method_that_chooses_for_some_rows_only_is_refused_naming_the_job():
    # Before: one row without extra.chosen switched the whole job to the plurality vote, so
    # these rows scored 0.5 (vote) where the chosen row alone scored 1.0.
    chose = row("p1", ["ANSWER: 5", "ANSWER: 1", "ANSWER: 5"])
    chose["extra"] = {"chosen": 1}
    silent = row("p2", ["ANSWER: 2"])
    with pytest.raises(
        ValueError, match=r"^m/b/d/best_of_n/seed0: the method chose .* for 1 of 2 problems .*'p2'"
    ):
        score_generations(
            [chose, silent], PROBLEMS, FakeTask(), params=1, n_boot=10, job="m/b/d/best_of_n/seed0"
        )
    silent["extra"] = {"chosen": 0}
    s = score_generations([chose, silent], PROBLEMS, FakeTask(), params=1, n_boot=10)
    assert s["selection"] == "chosen by scorer" and s["accuracy"]["value"] == 1.0
    s = score_generations(
        [row("p1", ["ANSWER: 1"]), row("p2", ["x"])], PROBLEMS, FakeTask(), params=1, n_boot=10
    )
    assert s["selection"] == "plurality vote"


@pytest.mark.parametrize("bad", [3, -1, "1", True, 1.0])
def test_a_chosen_index_that_names_no_sample_is_one_clear_error(bad):
    r = row("p1", ["ANSWER: 1", "ANSWER: 2"])
    r["extra"] = {"chosen": bad}
    with pytest.raises(
        ValueError, match=r"problem_id 'p1': extra.chosen must be the index of one of its 2 samples"
    ):
        score_generations([r], PROBLEMS, FakeTask(), params=1, n_boot=10)
