"""The two DRR loops as pure functions over injected callables (no model in here).

- `distil` is Algorithm 1 (Section 3.1, the DRR paper): the reasoner answers; a wrong
  answer is recorded as Reject and the reasoner is re-prompted with the history C, until an
  answer is right (recorded as Accept, stop) or `max_turns` attempts were made (4 for
  generation, Appendix A "Maximum Turns").
- `infer` is Section 3.3: the same loop with the discriminator's verdict as the stopping
  condition; still rejected after `max_turns` (5 at inference, Appendix A) = abstention.

    reasoner(question, context) -> (answer, rationale)    # context: tuple of earlier Attempts
    is_correct(answer) -> bool                            # the gold lives only in here
    judge(question, context, answer, rationale) -> "accept" | "reject"

The reasoner and the judge are never given the gold; `is_correct` is called only by
`distil` (for the label) and by `label_turns` after the fact (for scoring). How the context
is rendered into a prompt (environment message, exploration vs gradual strategy, Appendix B)
is the prompt template's business, not the loop's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DISTIL_MAX_TURNS = 4  # Appendix A, "Maximum Turns": four for generation
INFER_MAX_TURNS = 5  # ... and five for inference


@dataclass(frozen=True)
class Attempt:
    """One turn: the reasoner's answer and rationale, and the verdict on it."""

    answer: str
    rationale: str
    verdict: str  # "accept" | "reject"

    def to_dict(self) -> dict:
        return {"answer": self.answer, "rationale": self.rationale, "verdict": self.verdict}


Reasoner = Callable[[str, tuple], tuple[str, str]]
Judge = Callable[[str, tuple, str, str], str]


def _check_turns(max_turns: int) -> None:
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")


def distil(
    question: str, reasoner: Reasoner, is_correct: Callable[[str], bool], max_turns: int = DISTIL_MAX_TURNS
) -> list[Attempt]:
    """Algorithm 1 for one question: the attempts, each Reject until an Accept or max_turns.

    Line 9–13: verdict = Accept iff A' = A; line 15: C ← C ∪ {A', r}; line 16: stop at the
    maximum number of turns. The last attempt of a trace that never succeeded is a Reject.
    """
    _check_turns(max_turns)
    attempts: list[Attempt] = []
    while len(attempts) < max_turns:
        answer, rationale = reasoner(question, tuple(attempts))
        if is_correct(answer):
            attempts.append(Attempt(answer, rationale, "accept"))
            break
        attempts.append(Attempt(answer, rationale, "reject"))
    return attempts


def infer(question: str, reasoner: Reasoner, judge: Judge, max_turns: int = INFER_MAX_TURNS) -> dict:
    """Section 3.3 for one question: {"status": "answered"|"abstained", "turns": [...]}.

    Stops at the first turn the judge accepts; if the judge rejected all `max_turns` answers
    the episode is abstained ("after which wrong answers are counted as abstention during
    inference", Appendix A). Turns carry answer, rationale and decision; `label_turns` adds
    correctness for scoring (scoring/metrics.py).
    """
    _check_turns(max_turns)
    attempts: list[Attempt] = []
    while len(attempts) < max_turns:
        answer, rationale = reasoner(question, tuple(attempts))
        decision = judge(question, tuple(attempts), answer, rationale)
        if decision not in ("accept", "reject"):
            raise ValueError(f"judge returned {decision!r}, expected 'accept' or 'reject'")
        attempts.append(Attempt(answer, rationale, decision))
        if decision == "accept":
            break
    status = "answered" if attempts[-1].verdict == "accept" else "abstained"
    return {
        "status": status,
        "turns": [{"answer": a.answer, "rationale": a.rationale, "decision": a.verdict} for a in attempts],
    }


def label_turns(episode: dict, is_correct: Callable[[str], bool]) -> dict:
    """A copy of an inference episode with "correct" on every turn (scored after the fact)."""
    turns = [{**t, "correct": bool(is_correct(t["answer"]))} for t in episode["turns"]]
    return {**episode, "turns": turns}


class NeedsMoreTurns(Exception):
    """Replaying a judge over stored turns ran past the turns that were generated."""


def replay(episode: dict, judge: Judge, question: str = "", max_turns: int = INFER_MAX_TURNS) -> dict:
    """Re-judge stored turns with another judge, without generating (sample once, score many).

    Valid because the reasoner's turn t depends only on turns < t, which the new judge
    rejected too. Raises NeedsMoreTurns when the new judge rejects every stored turn but the
    episode has fewer than `max_turns` (the reasoner must be run again). E.g. always-accept
    replays from any episode; always-reject needs all `max_turns` turns.
    """
    _check_turns(max_turns)
    turns = episode["turns"][:max_turns]
    kept: list[dict] = []
    for t in turns:
        context = tuple(Attempt(k["answer"], k.get("rationale", ""), "reject") for k in kept)
        decision = judge(question, context, t["answer"], t.get("rationale", ""))
        kept.append({**t, "decision": decision})
        if decision == "accept":
            return {**episode, "status": "answered", "turns": kept}
    if len(kept) < max_turns:
        raise NeedsMoreTurns(
            f"episode {episode.get('id')!r}: {len(kept)} stored turns, "
            f"judge rejected all, max_turns={max_turns}"
        )
    return {**episode, "status": "abstained", "turns": kept}
