"""Step-level beam search (retrace.methods.beam) on a scripted policy and judge.

The policy writes step "r{t}s{j}" (round t, sample j), or what a test's `steps` says; the
judge scores a text by its last step label (higher j is better) unless a test overrides it.
"""

from __future__ import annotations

import re

import pytest
from fake_backend import engine_requests
from judged_backend import is_judge, judged_llm
from test_methods import ctx, method_cfg, problems  # noqa: F401 - fixture

from retrace.util.registry import METHODS

SEP = "\n\n"
SOLUTION = re.compile(r"(?:Solution|Steps so far):\n(.*)\n\n(?:Is this|Are these)", re.S)


def solution_of(judge_request) -> str:
    return SOLUTION.search(judge_request.messages[0].content).group(1)


def label_score(solution: str) -> float:
    if "boxed" in solution:
        return 0.95
    labels = re.findall(r"r\d+s(\d+)", solution)
    return int(labels[-1]) / 10 if labels else 0.0


def responder(steps=lambda t, j, prefix: f"r{t}s{j}", judge=label_score, greedy=None):
    """respond(request) for JudgedBackend: policy steps (sampled or greedy) and judge scores."""

    def respond(request):
        if is_judge(request):
            return float(judge(solution_of(request)))
        prefix = request.messages[-1].content if request.continue_final else ""
        t = prefix.count(SEP)
        if request.sampling.temperature == 0 and greedy is not None:
            return greedy(t, prefix) + SEP + "never seen"
        return steps(t, request.sample_index, prefix) + SEP + "never seen"

    return respond


def cfg(**changes) -> dict:
    return method_cfg("beam", **{"width": 2, "expand": 2, "max_steps": 3, **changes})


def policy_requests(engines):
    return [r for r in engine_requests(engines) if not is_judge(r)]


def test_beams_are_pruned_to_width_and_continue_from_their_prefix(tmp_path, problems):
    llm, engines = judged_llm(tmp_path, responder())
    [row] = METHODS.get("beam")(problems[:1], cfg(), llm, ctx())
    sent = policy_requests(engines)
    assert len(sent) == 4 + 4 + 4  # root: width x expand; then 2 beams x 2, twice
    first, later = sent[:4], sent[4:]
    assert not any(r.continue_final for r in first) and len(first[0].messages) == 1
    assert all(r.continue_final and r.messages[-1].role == "assistant" for r in later)
    assert all(SEP in r.sampling.stop for r in sent)
    assert {r.sampling.max_tokens for r in sent} == {cfg()["sampling"]["max_tokens"]}
    # Round 0 keeps the two best (s3, s2); round 1 continues exactly those prefixes.
    assert [r.messages[-1].content for r in later[:4]] == ["r0s3" + SEP] * 2 + ["r0s2" + SEP] * 2
    for step in row["extra"]["steps"]:
        kept = [c for c in step["candidates"] if c["kept"]]
        assert len(kept) == 2
        best = sorted((c["score"] for c in step["candidates"]), reverse=True)[:2]
        assert sorted((c["score"] for c in kept), reverse=True) == best
    # Later rounds tie on score (the judge reads the last label): generation order decides.
    assert [s["text"] for s in row["samples"]] == [
        SEP.join(["r0s3", "r1s1", "r2s1"]),
        SEP.join(["r0s2", "r1s1", "r2s1"]),
    ]
    assert row["extra"]["ends"] == ["max_steps", "max_steps"] and row["extra"]["chosen"] == 0
    assert row["extra"]["compute"]["policy"]["requests"] == 12


def test_a_final_answer_ends_the_beam_and_the_search(tmp_path, problems):
    def steps(t, j, prefix):
        return "so \\boxed{5}" if (t, j) == (1, 1) else f"r{t}s{j}"

    llm, engines = judged_llm(tmp_path, responder(steps))
    [row] = METHODS.get("beam")(problems[:1], cfg(max_steps=4), llm, ctx())
    assert len(policy_requests(engines)) == 4 + 4  # both kept beams answered in round 1
    assert row["extra"]["ends"] == ["answer", "answer"]
    assert [s["text"] for s in row["samples"]] == [
        "r0s3" + SEP + "so \\boxed{5}",
        "r0s2" + SEP + "so \\boxed{5}",
    ]
    assert row["samples"][0]["generated_tokens"] == 1 + 2  # its own path: "r0s3", "so \boxed{5}"
    assert len(row["samples"][0]["step_keys"]) == 2


def test_an_empty_step_ends_the_beam_as_eos(tmp_path, problems):
    def steps(t, j, prefix):
        return "" if t == 1 else f"r{t}s{j}"

    llm, engines = judged_llm(tmp_path, responder(steps))
    [row] = METHODS.get("beam")(problems[:1], cfg(), llm, ctx())
    assert row["extra"]["ends"] == ["eos", "eos"]
    assert [s["text"] for s in row["samples"]] == ["r0s3", "r0s2"]  # deduped: one per parent
    judged = [solution_of(r) for r in engine_requests(engines) if is_judge(r)]
    assert "r0s3" in judged


def test_judge_scores_and_identity_are_stored(tmp_path, problems):
    llm, _ = judged_llm(tmp_path, responder())
    rows = METHODS.get("beam")(problems[:2], cfg(max_steps=1), llm, ctx())
    for row in rows:
        assert row["extra"]["scores"] == pytest.approx([0.3, 0.2])
        assert row["extra"]["scorer"]["name"] == "llm_judge"
        assert row["extra"]["compute"]["scorer"]["requests"] == 4
        assert row["extra"]["width"] == 2 and row["extra"]["lookahead"] == 0


def test_reruns_are_served_from_the_cache(tmp_path, problems):
    llm, _ = judged_llm(tmp_path, responder())
    first = METHODS.get("beam")(problems[:2], cfg(), llm, ctx(seed=4))
    again, engines = judged_llm(tmp_path, responder())
    second = METHODS.get("beam")(problems[:2], cfg(), again, ctx(seed=4))
    assert engines == [] and first == [
        {**r, "samples": [{**s, "cache_hit": False} for s in r["samples"]]} for r in second
    ]


@pytest.mark.parametrize("bad", [{"width": 0}, {"expand": 0}, {"max_steps": 0}, {"separator": ""}])
def test_settings_that_could_leave_no_answer_are_refused(tmp_path, problems, bad):
    llm, _ = judged_llm(tmp_path, responder())
    with pytest.raises(ValueError, match="beam search needs"):
        METHODS.get("beam")(problems[:1], cfg(**bad), llm, ctx())
