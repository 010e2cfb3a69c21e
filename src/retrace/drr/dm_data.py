"""Distillation traces → discriminator (DM) training data, as the DRR paper prepares it.

A trace is what Algorithm 1 (`loop.distil`) recorded for one training question:

    {"id": "csqa-17", "dataset": "commonsense_qa", "question": "...",
     "attempts": [{"answer": "B", "rationale": "...", "verdict": "reject"},
                  {"answer": "D", "rationale": "...", "verdict": "accept"}]}

    rows = rows_from_traces(traces)                 # one row per attempt, x = {Q, C, A', r}
    data = build_dataset(traces, seed=0)            # downsample → grouped 80/20 split → weights
    data["train"], data["dev"], data["weights"]     # weights {0: 1.0, 1: 3.0}
    falsifier = build_dataset(traces, seed=0, shuffled_labels=True)

Paper rules implemented (section numbers of the DRR paper):
- x = {Q, C, A', r}, y ∈ {Accept, Reject} (Section 3.2); Accept ↦ 1, Reject ↦ 0 (Appendix A,
  "Training Setting").
- Reject rows are downsampled to keep all Accept rows, per dataset, turns of one id NOT kept
  together (Appendix A, "Data Preparation"). Here the Reject count is downsampled to the
  Accept count (the issue's rule; the paper gives no target ratio).
- Then, per dataset, an 80/20 train/dev split keeping all rows of one id together, and the
  per-dataset splits concatenated (Appendix A). Deterministic per seed.
- Weighted cross-entropy, Eq. (1), with w_accept = 3 · w_reject (Section 4.2, "Fine-tuning
  Details"); `weighted=False` gives the unweighted comparison.
Not covered: the rendering of the DM instruction beyond the Appendix B context wording (the
paper prints only "a basic instruction"), and training itself.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from retrace.drr.prompts import render_context

ACCEPT, REJECT = 1, 0  # Appendix A: "we map Accept labels to 1, Reject labels to 0"
ACCEPT_WEIGHT_RATIO = 3.0  # Section 4.2: w_1 "set three times higher than" w_0
DEV_FRACTION = 0.2  # Appendix A: "an 80/20 split"
SEPARATOR = "\n\n"  # between the parts of a DM input


def rows_from_trace(trace: Mapping) -> list[dict]:
    """One DM row per attempt: question, the earlier attempts as context, answer, rationale, label."""
    rows: list[dict] = []
    context: list[dict] = []
    for turn, att in enumerate(trace["attempts"]):
        if att["verdict"] not in ("accept", "reject"):
            raise ValueError(f"trace {trace['id']!r} turn {turn}: verdict {att['verdict']!r}")
        rows.append(
            {
                "row_id": f"{trace['id']}#{turn}",
                "id": str(trace["id"]),
                "dataset": trace.get("dataset", ""),
                "turn": turn,
                "question": trace["question"],
                "context": list(context),
                "answer": att["answer"],
                "rationale": att["rationale"],
                "label": ACCEPT if att["verdict"] == "accept" else REJECT,
            }
        )
        context.append({"answer": att["answer"], "rationale": att["rationale"]})
    return rows


def rows_from_traces(traces: Iterable[Mapping]) -> list[dict]:
    """All rows of all traces, in trace order; duplicate question ids are an error."""
    rows, seen = [], set()
    for trace in traces:
        if str(trace["id"]) in seen:
            raise ValueError(f"question id {trace['id']!r} appears in two traces")
        seen.add(str(trace["id"]))
        rows.extend(rows_from_trace(trace))
    return rows


def judged_text(answer: str, rationale: str) -> str:
    """The judged part of a DM input: the answer and rationale being accepted or rejected."""
    return f"Answer: {answer}\nRationale: {rationale}"


def dm_input_segments(row: Mapping, instruction: str = "", strategy: str = "exploration") -> dict[str, str]:
    """The DM input's parts in reading order: instruction, question, past context, and the
    judged part (the answer and rationale being judged, always last)."""
    return {
        "instruction": instruction,
        "question": f"Question: {row['question']}",
        "context": render_context(row["context"], strategy),
        "judged": judged_text(row["answer"], row["rationale"]),
    }


def dm_input_text(row: Mapping, instruction: str = "", strategy: str = "exploration") -> str:
    """The DM's input string for a row: instruction, question, past context, answer, rationale
    (untruncated; drr/dm.py fits it to the DM's max_length, oldest context first)."""
    return SEPARATOR.join(x for x in dm_input_segments(row, instruction, strategy).values() if x)


def _by_dataset(rows: Iterable[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r.get("dataset", "")].append(r)
    return dict(sorted(groups.items()))


def _rng(seed: int, purpose: str, group: str) -> random.Random:
    # A str seed is hashed with SHA-512 by `random`, so this is stable across processes
    # (unlike hash(), which PYTHONHASHSEED salts).
    return random.Random(f"{seed}:{purpose}:{group}")


def downsample_rejects(rows: Sequence[dict], seed: int = 0) -> list[dict]:
    """Per dataset: all Accept rows, and a seeded sample of Reject rows of the same size
    (all Rejects when there are fewer). Output sorted by (dataset, row_id)."""
    out = []
    for group, members in _by_dataset(rows).items():
        members = sorted(members, key=lambda r: r["row_id"])
        accepts = [r for r in members if r["label"] == ACCEPT]
        rejects = [r for r in members if r["label"] == REJECT]
        keep = _rng(seed, "downsample", group).sample(rejects, min(len(accepts), len(rejects)))
        out.extend(sorted(accepts + keep, key=lambda r: r["row_id"]))
    return out


def grouped_split(
    rows: Sequence[dict], seed: int = 0, dev_fraction: float = DEV_FRACTION
) -> tuple[list[dict], list[dict]]:
    """(train, dev): per dataset, a seeded shuffle of the question ids, the first
    round(dev_fraction · n_ids) ids to dev; every row of an id goes where its id goes."""
    if not 0.0 <= dev_fraction <= 1.0:
        raise ValueError(f"dev_fraction must be in [0, 1], got {dev_fraction}")
    train: list[dict] = []
    dev: list[dict] = []
    for group, members in _by_dataset(rows).items():
        ids = sorted({r["id"] for r in members})
        _rng(seed, "split", group).shuffle(ids)
        dev_ids = set(ids[: round(dev_fraction * len(ids))])
        for r in sorted(members, key=lambda r: r["row_id"]):
            (dev if r["id"] in dev_ids else train).append(r)
    return train, dev


def class_weights(weighted: bool = True, ratio: float = ACCEPT_WEIGHT_RATIO) -> dict[int, float]:
    """{REJECT: w_0, ACCEPT: w_1} for Eq. (1): w_1 = ratio · w_0 (3, Section 4.2), or all 1.0."""
    return {REJECT: 1.0, ACCEPT: ratio if weighted else 1.0}


def implied_accept_threshold(ratio: float, threshold: float = 0.5) -> float:
    """The P(correct | x) above which a DM trained with w_accept = ratio · w_reject and
    accepting when its P(Accept) > `threshold` accepts, if it fits its (1:1 downsampled)
    training data perfectly.

    Weighted cross-entropy is minimised by q = r·p / (r·p + 1 − p) (the class-weighted
    posterior), so q > t ⟺ p > t / (r·(1 − t) + t). The paper's 3:1 Accept weight with the
    argmax (t = 0.5) accepts when p > 0.25: MORE lenient than the unweighted 0.5, the opposite
    of the "stricter acceptance criteria" its Section 3.2/6 intend. retrace implements the
    weighting as printed (Section 4.2: w_1 "set three times higher than w_0", with w_1 the
    Accept weight), reports this implied threshold, and reports the weighted and unweighted
    DMs' false-positive rates side by side; the intended strictness is available as
    `dm.accept_threshold: 0.9` (p > 0.75) or `dm.accept_weight_ratio: 0.333` (p > 0.75 at
    t = 0.5). Assumes calibration on the training distribution (Accept:Reject 1:1 after
    downsampling), not on the turns met at inference.
    """
    if ratio <= 0 or not 0.0 < threshold < 1.0:
        raise ValueError(f"need ratio > 0 and 0 < threshold < 1, got {ratio}, {threshold}")
    return threshold / (ratio * (1.0 - threshold) + threshold)


def weighted_cross_entropy(
    logits: Sequence[Sequence[float]], labels: Sequence[int], weights: Mapping[int, float]
) -> float:
    """Eq. (1): −mean over examples of w_y · log softmax(z)_y, a reference for the trainer.

    Eq. (1) is an expectation, so it divides by the number of examples; PyTorch's
    `CrossEntropyLoss(weight=..., reduction="mean")` divides by the sum of the weights
    instead (its documented "weighted mean"), which differs by a batch-dependent factor.
    """
    if len(logits) != len(labels) or not labels:
        raise ValueError("need one label per logit pair, and at least one")
    total = 0.0
    for z, y in zip(logits, labels):
        top = max(z)
        log_norm = top + math.log(sum(math.exp(v - top) for v in z))
        total += weights[y] * (log_norm - z[y])
    return total / len(labels)


def shuffle_labels(rows: Sequence[dict], seed: int = 0) -> list[dict]:
    """Falsifier: the same rows with their labels permuted (seeded); label counts unchanged.

    Apply to the train split only, so the dev split still measures the true pairing.
    """
    labels = [r["label"] for r in rows]
    _rng(seed, "shuffle", "").shuffle(labels)
    return [{**r, "label": y, "label_shuffled": True} for r, y in zip(rows, labels)]


def label_counts(rows: Iterable[Mapping]) -> dict[str, int]:
    """{"accept": n, "reject": n}."""
    labels = [r["label"] for r in rows]
    return {"accept": labels.count(ACCEPT), "reject": labels.count(REJECT)}


def build_dataset(
    traces: Iterable[Mapping],
    seed: int = 0,
    dev_fraction: float = DEV_FRACTION,
    weighted: bool = True,
    shuffled_labels: bool = False,
) -> dict:
    """Traces → {"train", "dev", "weights", "counts", "settings"} in the paper's order
    (rows → downsample Rejects → grouped split; Appendix A), optionally the shuffled falsifier."""
    rows = rows_from_traces(traces)
    train, dev = grouped_split(downsample_rejects(rows, seed), seed, dev_fraction)
    if shuffled_labels:
        train = shuffle_labels(train, seed)
    return {
        "train": train,
        "dev": dev,
        "weights": class_weights(weighted),
        "counts": {
            "raw": label_counts(rows),
            "train": label_counts(train),
            "dev": label_counts(dev),
            "questions": {"train": len({r["id"] for r in train}), "dev": len({r["id"] for r in dev})},
        },
        "settings": {
            "seed": seed,
            "dev_fraction": dev_fraction,
            "weighted": weighted,
            "shuffled_labels": shuffled_labels,
        },
    }
