"""The judge scorer and beam search on the real small model (SmolLM2-135M, llama.cpp)."""

from __future__ import annotations

import pytest
from test_methods import ctx, method_cfg, problems  # noqa: F401 - fixture

from retrace.engine.llm import CachedLLM
from retrace.engine.scorers import ScoreItem, build_scorer
from retrace.store.cache import RequestCache
from retrace.util.registry import METHODS

pytestmark = pytest.mark.slow


@pytest.fixture
def llm(tmp_path, llamacpp_smollm2, smollm2_manifest):
    # The engine is the session's; this CachedLLM is never closed so the engine outlives it.
    return CachedLLM(
        lambda: llamacpp_smollm2, "llamacpp", smollm2_manifest, RequestCache(tmp_path / "requests.sqlite")
    )


def test_judge_reads_yes_and_no_from_real_logprobs(llm, problems):
    scorer = build_scorer(method_cfg("beam"), llm)
    [score] = scorer.score(
        [ScoreItem(problems[0], f"3 + 4 = 7, so the answer is \\boxed{{{problems[0].gold}}}.")]
    )
    assert score.valid and 0.0 < score.value < 1.0  # SmolLM2 puts both in its top 10
    assert score.prompt_tokens > 20 and score.generated_tokens == 1 and score.key


def test_beam_runs_on_llamacpp_with_continued_steps(llm, problems):
    cfg = method_cfg("beam", width=1, expand=2, max_steps=2, sampling={"max_tokens": 16})
    [row] = METHODS.get("beam")(problems[:1], cfg, llm, ctx())
    steps = row["extra"]["steps"]
    assert len(steps) in (1, 2) and len(steps[0]["candidates"]) == 2
    assert all(0.0 <= c["score"] <= 1.0 for s in steps for c in s["candidates"])
    chosen = row["samples"][row["extra"]["chosen"]]
    assert chosen["text"] and chosen["generated_tokens"] > 0
    assert row["extra"]["compute"]["policy"]["requests"] == 2 * len(steps)
