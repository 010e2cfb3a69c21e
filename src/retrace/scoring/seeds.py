"""Which seeds of a claims row count, and which test their per-question scores get.

    counted, note = counted_seeds(m, deterministic, "method")   # m: seeds x questions scores
    p, test = seeds_test(counted_a, counted_b)                   # the row's p-value and test name

- Seeds decided from the design (`deterministic`: a temperature-0 label, run_facts): seed 0
  counts, once; the note says how the others compare (copies, or reruns that differ).
- Seeds checked from the data: a SAMPLED label whose seeds are identical on at least
  NEAR_COPY of the questions did not draw anew per seed (the seed never reached the engine,
  or a cache answered every seed alike); its seeds are one draw, seed 0 counts, and the note
  says so. `retrace plan --check` reads configs only and cannot see this; the claims stage
  can. Why 0.98: independent draws agree on every seed of a question with probability
  p^k + (1 - p)^k; a 3-seed method at 5 % accuracy on a U-shaped difficulty (Beta(0.05,
  0.95), the calibration's hardest) agrees on 93 % of questions on average, so 98 % leaves
  genuine sampling alone on any data set of 100 questions or more, and flags copies (100 %)
  and near-copies (a non-deterministic engine rerunning one draw: a few answers move).
  Where 30 questions all agree by chance the row is counted as one draw: a per-question mean
  of identical seeds is that one draw anyway, so only the test's null changes, conservatively.
- The test (seeds_test): equal counted seeds a side: the exact sign-flip test of
  mean(A - B) = 0 on per-question means (stats.sign_flip_exact; McNemar with one seed a
  side). Unequal (a temperature-0 baseline, one draw, against sampled seeds): the per-question
  difference is skewed, and no single exact test holds its level under every null a reader
  means. The sign-flip test's null is equal mean accuracy, any per-question pattern (a method
  x question interaction included), but far in the tail it is liberal when the difference is
  skewed (refine vs greedy, 5 % accuracy, every draw of a question one success probability:
  0.004 at a Holm level of 0.00125); the stratified exact test (stats.stratified_exact) is
  exact under that "same probability per question" null but over-rejects under interaction
  (0.096 at 0.05, 0.0092 at 0.00167, the issue-56 simulation). The row takes the LARGER of
  the two p-values (an intersection of the two rejection regions): its chance of rejecting
  is at most either test's, so it holds the level wherever either test does, and
  tests/unit/test_claims_seeds.py measures it under both nulls. Non-0/1 scores (FS, ART's
  task-weighted rows) have no stratified test: the sign-flip test alone (stats.sign_flip_test:
  exact on a lattice; ART's task weights put the differences off any small lattice, and
  there its Edgeworth approximation, `sign_flip_edgeworth`).
- A margin (non-inferiority rows, scoring.verdicts.DIRECTIONS): the sign-flip test of
  mean(A - B) = -margin (or +margin), on the differences shifted by the margin.
"""

from __future__ import annotations

import numpy as np

from retrace.scoring.stats import sign_flip_test, stratified_exact

NEAR_COPY = 0.98  # share of questions on which every seed agrees: above it, one draw (see above)
MIN_COPY_QUESTIONS = 10  # fewer questions say nothing about copies
MAX_P_TEST = "max(sign_flip_exact, stratified_exact)"


def identical_share(m: np.ndarray) -> float:
    """Share of questions (columns) on which every seed (row) scores as seed 0 does."""
    return float((m == m[0]).all(axis=0).mean()) if m.shape[1] else 1.0


def _rerun_note(m: np.ndarray, side: str, repeatable: bool | None) -> str:
    differ = int((m != m[0]).any(axis=0).sum())
    how = f", which differ on {differ} questions" if differ else ", identical"
    if repeatable is False:
        how += ": the engine is not deterministic"
    elif repeatable and differ:
        how += " although the engine is deterministic: check it"
    return f"{side}: temperature 0, seed 0 of {len(m)} counted (the others are reruns{how})"


def _copies_note(m: np.ndarray, side: str) -> str:
    """The note of a sampled side whose seeds are (nearly) copies; "" when they are draws."""
    if m.shape[1] < MIN_COPY_QUESTIONS or identical_share(m) < NEAR_COPY:
        return ""
    differ = int((m != m[0]).any(axis=0).sum())
    how = (
        "identical on every question"
        if not differ
        else f"identical on all but {differ} of {m.shape[1]} questions"
    )
    return (
        f"{side}: sampled, but its {len(m)} seeds are {how}: counted as one draw (seed 0); "
        "check that each seed reached the engine"
    )


def counted_seeds(
    m: np.ndarray, deterministic: bool, side: str, repeatable: bool | None = None
) -> tuple[np.ndarray, str]:
    """(the seeds that count, a note): seed 0 alone of a method that is one draw by design
    (`deterministic`) or whose seeds are copies in the data (module docstring); every seed
    otherwise. `repeatable` (the engine's `deterministic` setting; None: not known) says
    whether a deterministic method's seeds had to be identical."""
    if len(m) == 1:
        return m, ""
    if deterministic:
        return m[:1], _rerun_note(m, side, repeatable)
    note = _copies_note(m, side)
    return (m[:1], note) if note else (m, "")


def seeds_test(da: np.ndarray, db: np.ndarray, shift: float = 0.0) -> tuple[float, str]:
    """(p_value, test name) of mean(A - B) = shift on the counted seeds (seeds x questions)
    of each side: the sign-flip test on per-question means, and with unequal seed counts on
    0/1 scores (and no shift) the larger of it and the stratified exact test (module docstring)."""
    d = da.mean(axis=0) - db.mean(axis=0) - shift
    p, name = sign_flip_test(d)
    binary = np.isin(da, (0, 1)).all() and np.isin(db, (0, 1)).all()
    if len(da) != len(db) and binary and shift == 0.0:
        return max(p, stratified_exact(da, db)), MAX_P_TEST
    return p, name
