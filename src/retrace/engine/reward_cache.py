"""Reward-model scores kept in the request cache, so a rerun scores only what is missing.

    scores = cached_scores(cache, reward_id, items, score_batch, batch_size)

A reward score is a function of the reward model (its weights: repo at a pinned revision, or a
local folder's file hashes), how the scorer reads it (kind, aggregate, squash, dtype, ...), the
question and the solution. `reward_key` hashes exactly those, so the key is known before the
model loads: a rerun whose scores are all cached never loads the reward model (143 GB for
Qwen2.5-Math-RM-72B). Each batch is published to the cache as soon as it is scored
(retrace.store.cache.RequestCache: a job killed mid-scoring loses the batch in flight only).

An entry is a Completion whose text is {"value", "valid"} (finish_reason "reward", the forward
pass's tokens as prompt tokens), its request the scored conversation: the cache's own checks
(wrong key, truncated entry: set aside and scored again) hold for scores as for generations.
Not covered: a hub reward model with `revision: null` is keyed by "whatever the local HF cache
holds" at its first use; pin the revision (`retrace plan --check` fails an unpinned one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from retrace.engine.scorers import Score, ScoreItem
from retrace.util.hashing import sha256_json
from retrace.util.records import Completion, Message, Request, Sampling

# scorer keys that change what a score is (device, batch size and placement do not)
SCORE_SETTINGS = ("kind", "aggregate", "squash", "plus", "minus", "dtype", "auto_class")
NO_GENERATION = Sampling(temperature=0.0, max_tokens=0)


def reward_request(item: ScoreItem) -> Request:
    """The scored conversation as a request (stored beside the score for audit)."""
    messages = (Message("user", item.problem.question), Message("assistant", item.solution))
    return Request(messages=messages, sampling=NO_GENERATION, tag=f"reward:{item.problem.id}")


def reward_key(reward_id: dict, item: ScoreItem) -> str:
    """The cache key of one score: reward model, its scoring settings, question, solution."""
    return sha256_json({"reward": reward_id, "partial": item.partial, **reward_request(item).key_material()})


def as_completion(s: Score) -> Completion:
    return Completion(
        text=json.dumps({"value": s.value, "valid": s.valid}),
        finish_reason="reward",
        prompt_tokens=s.prompt_tokens,
        generated_tokens=0,
    )


def as_score(c: Completion, key: str) -> Score | None:
    """The stored score (None: the entry is not a score, so it is scored again)."""
    try:
        found = json.loads(c.text)
        return Score(float(found["value"]), bool(found["valid"]), prompt_tokens=c.prompt_tokens, key=key)
    except (ValueError, TypeError, KeyError):
        return None


def cached_scores(
    cache: Any,
    reward_id: dict,
    items: Sequence[ScoreItem],
    score_batch: Callable[[Sequence[ScoreItem]], list[Score]],
    batch_size: int,
) -> list[Score]:
    """Scores of `items` in order: cached ones read, the rest scored `batch_size` at a time
    (each distinct key once) and published batch by batch."""
    keys = [reward_key(reward_id, it) for it in items]
    found = cache.get_many(keys)
    cache.record_hits(found)
    out = {k: s for k, s in ((k, as_score(c, k)) for k, c in found.items()) if s is not None}
    missing = list({k: it for k, it in zip(keys, items) if k not in out}.items())
    for i in range(0, len(missing), max(1, batch_size)):
        batch = missing[i : i + max(1, batch_size)]
        scores = score_batch([it for _, it in batch])
        cache.put_many(
            (k, reward_request(it), as_completion(s)) for (k, it), s in zip(batch, scores, strict=True)
        )
        out.update({k: replace(s, key=k) for (k, _), s in zip(batch, scores, strict=True)})
    return [out[k] for k in keys]
