"""DRR's metrics: Formula Score FS(k), accuracy (two labelled variants), Acc(D), and the
discriminator's turn-level precision/recall/false-positive rate.

Source: Distillation-Reinforcement-Reasoning (DRR), the paper (titled in retrace/config/paper_numbers.yaml),
Section 4.1 "Evaluation" (Acc, FS, Acc(D)), Section 6 "Qualitative Examples" (abstentions
count as not correct for Acc) and Appendix A "Maximum Turns" (still rejected after the last
inference turn = abstention).

Input: one *episode* per question,

    {"id": "q1", "status": "answered" | "abstained",
     "turns": [{"answer": "B", "correct": False, "decision": "reject"},
               {"answer": "C", "correct": True,  "decision": "accept"}]}

`decision` is the judge's verdict on that turn's answer ("accept"/"reject"), or None when no
judge ran (zero-shot baselines). `correct` is the answer's correctness against the gold,
added after the judge decided (the judge never sees it). An "answered" episode's answer is
its last turn's; an "abstained" episode gave none.

    fs = formula_score(episodes, k=3)          # percent, as Table 1 reports it
    acc = accuracy(episodes)                   # abstention = not correct (the paper's Acc)
    acc_last = accuracy_last_attempt(episodes) # abstention scored as its last attempt

Checking Table 1 against these definitions: for baselines (no abstentions) FS(1) = 2·Acc − 100
and FS(3) = 4·Acc − 300 hold to rounding (CoT Llama3 CommonSenseQA: 73.5 → 47.0, −6.1). For the
DRR rows, the FS(1)/FS(3) pair implies a correct-answered rate *below* the reported Acc
(`implied_rates`; DRR GPT-4 CommonSenseQA: FS 74.4/52.2 ⇒ 85.5% correct-answered vs Acc 86.2),
i.e. the paper's Acc for DRR is consistent with `accuracy_last_attempt`, not with Section 6's
statement. That is why both variants are reported, labelled. The paper's "Overall" column is
not a weighted mean of the per-dataset columns (CoT Llama3: 2·72.5 − 100 = 45 ≠ 48.5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Episode = Mapping  # {"id", "status", "turns": [{"answer", "correct", "decision"}]}
STATUSES = ("answered", "abstained")
DECISIONS = ("accept", "reject")


def _check(episode: Episode) -> None:
    status, turns = episode.get("status"), episode.get("turns") or []
    if status not in STATUSES:
        raise ValueError(f"episode {episode.get('id')!r}: status must be one of {STATUSES}, got {status!r}")
    if status == "answered" and not turns:
        raise ValueError(f"episode {episode.get('id')!r}: answered but has no turns")
    for t in turns:
        if t.get("decision") not in (*DECISIONS, None):
            raise ValueError(f"episode {episode.get('id')!r}: decision {t.get('decision')!r}")


def outcome(episode: Episode) -> str:
    """ "correct", "wrong" or "abstain": what the system finally did on this question."""
    _check(episode)
    if episode["status"] == "abstained":
        return "abstain"
    return "correct" if episode["turns"][-1]["correct"] else "wrong"


def fs_points(episode: Episode, k: float) -> float:
    """Per-question Formula Score: +1 correct, −k wrong, 0 abstain (Section 4.1; davis1967note)."""
    return {"correct": 1.0, "wrong": -float(k), "abstain": 0.0}[outcome(episode)]


def _percent(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("no episodes to score")
    return 100.0 * sum(values) / len(values)


def formula_score(episodes: Iterable[Episode], k: float) -> float:
    """FS(k) in percent: 100 · (n_correct − k · n_wrong) / n_questions (Section 4.1).

    Normalisation by all questions (abstentions included) as a percentage is what Table 1's
    baseline rows satisfy; range [−100k, 100]; all-abstain gives 0.
    """
    return _percent([fs_points(e, k) for e in episodes])


def fs1(episodes: Iterable[Episode]) -> float:
    """FS(1): S_correct = 1, S_incorrect = −1, S_abstain = 0 (Section 4.1)."""
    return formula_score(episodes, 1)


def fs3(episodes: Iterable[Episode]) -> float:
    """FS(3): the error penalty raised to −3 (Section 4.1)."""
    return formula_score(episodes, 3)


def accuracy(episodes: Iterable[Episode]) -> float:
    """Acc in percent, an abstention scored as not correct (Section 6: "these abstentions are
    considered incorrect answers for the accuracy score")."""
    return _percent([float(outcome(e) == "correct") for e in episodes])


def last_attempt_correct(episode: Episode) -> bool:
    """Whether the last attempt's answer is correct, whatever the status (False if no turns)."""
    _check(episode)
    turns = episode.get("turns") or []
    return bool(turns and turns[-1]["correct"])


def accuracy_last_attempt(episodes: Iterable[Episode]) -> float:
    """Acc in percent with an abstention scored as what its last attempt answered (labelled
    variant; see the module docstring for why Table 1's DRR rows need it)."""
    return _percent([float(last_attempt_correct(e)) for e in episodes])


def decision_correct(episode: Episode) -> bool:
    """Was the system's answer-or-abstain decision on this question right? (Acc(D), Section 4.1)

    With a judge ("For DRR, ... the DM accuracy at the last reasoning turn before an answer is
    given"): the last turn's decision is compared with the correctness of the answer it judged
    (accept a correct answer or reject a wrong one). Without one ("For zero-shot methods ...
    the percentage of LLM's successful answers and abstentions"): a correct answer and every
    abstention count as right decisions, a wrong answer does not. The zero-shot rule credits
    every abstention, even one whose answer would have been right; the paper defines it so.
    """
    _check(episode)
    turns = episode.get("turns") or []
    decision = turns[-1].get("decision") if turns else None
    if decision is None:
        return outcome(episode) in ("correct", "abstain")
    return (decision == "accept") == bool(turns[-1]["correct"])


def critic_decision_accuracy(episodes: Iterable[Episode]) -> float:
    """Acc(D) in percent over questions (Section 4.1, Figure 2)."""
    return _percent([float(decision_correct(e)) for e in episodes])


def turn_confusion(episodes: Iterable[Episode]) -> dict[str, int]:
    """Judge decisions over ALL judged turns, Accept as the positive class.

    tp: accepted a correct answer, fp: accepted a wrong one (the costly error, Section 6 "The
    Impact of False Positives"), fn: rejected a correct one, tn: rejected a wrong one.
    Turns with decision None are skipped.
    """
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for e in episodes:
        _check(e)
        for t in e.get("turns") or []:
            if t.get("decision") is None:
                continue
            accept, correct = t["decision"] == "accept", bool(t["correct"])
            counts[("t" if accept == correct else "f") + ("p" if accept else "n")] += 1
    return counts


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def discriminator_stats(episodes: Iterable[Episode]) -> dict:
    """{"precision_accept", "recall_accept", "false_positive_rate", "turn_accuracy", counts}.

    precision = tp/(tp+fp), recall = tp/(tp+fn), FPR = fp/(fp+tn) (share of wrong answers
    accepted); None where the denominator is 0 (e.g. precision of an always-reject judge).
    Note: at inference the turns a judge sees depend on its own earlier rejections, so these
    are not comparable to dev-set numbers on the distillation rows.
    """
    c = turn_confusion(episodes)
    n = sum(c.values())
    return {
        **c,
        "n_turns": n,
        "precision_accept": _ratio(c["tp"], c["tp"] + c["fp"]),
        "recall_accept": _ratio(c["tp"], c["tp"] + c["fn"]),
        "false_positive_rate": _ratio(c["fp"], c["fp"] + c["tn"]),
        "turn_accuracy": _ratio(c["tp"] + c["tn"], n),
    }


def drr_summary(episodes: Sequence[Episode], ks: Sequence[float] = (1, 3)) -> dict:
    """Every DRR metric of one run, each key labelled with its abstention rule."""
    out = {
        "n_questions": len(episodes),
        "accuracy_abstain_as_wrong": accuracy(episodes),
        "accuracy_abstain_as_last_attempt": accuracy_last_attempt(episodes),
        "abstention_rate": _percent([float(outcome(e) == "abstain") for e in episodes]),
        "acc_d": critic_decision_accuracy(episodes),
    }
    out.update({f"fs_{k:g}": formula_score(episodes, k) for k in ks})
    out.update({f"dm_{key}": v for key, v in discriminator_stats(episodes).items()})
    return out


def per_question(episodes: Iterable[Episode], metric: str = "accuracy", k: float = 1) -> dict:
    """{id: score} for paired claims (scoring/claims.py compare): metric is "accuracy",
    "accuracy_last_attempt", "fs" (FS points with penalty k) or "acc_d"."""
    score = {
        "accuracy": lambda e: float(outcome(e) == "correct"),
        "accuracy_last_attempt": lambda e: float(last_attempt_correct(e)),
        "fs": lambda e: fs_points(e, k),
        "acc_d": lambda e: float(decision_correct(e)),
    }[metric]
    return {str(e["id"]): score(e) for e in episodes}


def implied_rates(fs_a: float, k_a: float, fs_b: float, k_b: float) -> dict[str, float]:
    """Correct/wrong/abstain percentages implied by two reported FS values (k_a ≠ k_b).

    FS(k) = c − k·w, so w = (FS(k_a) − FS(k_b)) / (k_b − k_a), c = FS(k_a) + k_a·w and
    abstain = 100 − c − w. Used to check a paper table against the definition above.
    """
    w = (fs_a - fs_b) / (k_b - k_a)
    c = fs_a + k_a * w
    return {"correct": c, "wrong": w, "abstain": 100.0 - c - w}


# Falsifier judges: same signature as a trained discriminator's judge (see
# drr/loop.py), so a run with them is configuration, not a fork of the method.
def always_accept(question: str, context: Sequence, answer: str, rationale: str) -> str:
    """Accepts every answer: DRR collapses to its first turn (zero-shot CoT)."""
    return "accept"


def always_reject(question: str, context: Sequence, answer: str, rationale: str) -> str:
    """Rejects every answer: every question is abstained after max_turns (FS = 0, Acc = 0)."""
    return "reject"
