"""Lookahead search (retrace.methods.lookahead): candidates are scored at the end of a greedy
rollout, which can overturn the ranking plain beam search would make on the same steps."""

from __future__ import annotations

import pytest
from fake_backend import engine_requests
from judged_backend import is_judge, judged_llm
from test_beam import SEP, responder, solution_of
from test_methods import ctx, method_cfg, problems  # noqa: F401 - fixture

from retrace.util.registry import METHODS


def greedy(t, prefix):
    # Rolled out greedily, step r0s0 reaches an answer and r0s1 wanders off.
    return "so \\boxed{5}" if prefix.startswith("r0s0") else "r1g"


def cfg(name: str, **changes) -> dict:
    return method_cfg(name, **{"width": 1, "expand": 2, "max_steps": 2, "lookahead": 1, **changes})


def run(tmp_path, name, problems):
    llm, engines = judged_llm(tmp_path / name, responder(greedy=greedy))
    [row] = METHODS.get(name)(problems[:1], cfg(name), llm, ctx())
    return row, engine_requests(engines)


def test_lookahead_overturns_the_beam_choice(tmp_path, problems):
    beam, _ = run(tmp_path, "beam", problems)
    ahead, sent = run(tmp_path, "lookahead", problems)
    assert beam["samples"][0]["text"].startswith("r0s1")  # s1 looks better on its own
    assert ahead["samples"][0]["text"].startswith("r0s0")  # s0 leads to an answer
    round0 = ahead["extra"]["steps"][0]["candidates"]
    assert [c["lookahead"] for c in round0] == ["so \\boxed{5}", "r1g"]
    assert [c["score"] for c in round0] == pytest.approx([0.95, 0.1])  # the rollout decides
    assert [c["kept"] for c in round0] == [True, False]


def test_rollouts_are_greedy_continuations_and_never_kept(tmp_path, problems):
    row, sent = run(tmp_path, "lookahead", problems)
    policy = [r for r in sent if not is_judge(r)]
    rollouts = [r for r in policy if r.sampling.temperature == 0.0]
    assert [r.messages[-1].content for r in rollouts] == ["r0s0" + SEP, "r0s1" + SEP]
    assert all(r.continue_final and r.sample_index == 0 and SEP in r.sampling.stop for r in rollouts)
    # The next round samples from the kept step alone, not from its look-ahead text.
    round1 = [r for r in policy if r.sampling.temperature > 0 and r.continue_final]
    assert {r.messages[-1].content for r in round1} == {"r0s0" + SEP}
    # The last round is not looked ahead: its candidates end at max_steps.
    assert len(rollouts) == 2 and row["extra"]["ends"] == ["max_steps"]
    judged = [solution_of(r) for r in sent if is_judge(r)]
    assert "r0s0" + SEP + "so \\boxed{5}" in judged
    assert row["extra"]["compute"]["policy"]["requests"] == 2 + 2 + 2  # expand, roll out, expand
    assert row["extra"]["lookahead"] == 1


def test_depth_zero_is_refused(tmp_path, problems):
    llm, _ = judged_llm(tmp_path, responder())
    with pytest.raises(ValueError, match="depth"):
        METHODS.get("lookahead")(problems[:1], cfg("lookahead", lookahead=0), llm, ctx())


def test_deeper_lookahead_stops_at_an_answer(tmp_path, problems):
    llm, engines = judged_llm(tmp_path, responder(greedy=greedy))
    METHODS.get("lookahead")(problems[:1], cfg("lookahead", lookahead=3, max_steps=2), llm, ctx())
    rollouts = [r for r in engine_requests(engines) if not is_judge(r) and r.sampling.temperature == 0]
    # r0s0 answers after one greedy step; r0s1 keeps rolling ("r1g" ...) for all 3.
    assert sorted(r.messages[-1].content.count(SEP) for r in rollouts) == [1, 1, 2, 3]
