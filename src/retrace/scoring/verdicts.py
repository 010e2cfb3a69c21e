"""A claims row's verdict from its interval and adjusted p, and what its test's null is.

    verdict(ci_low, ci_high, n, p_adjusted, direction="greater")   # supported / contradicted / inconclusive
    test_of("not_below", 0.03, where)   # -0.03: the null shift of a non-inferiority row, checked
    true_verdict("greater", None, 0.0)  # "inconclusive": what a row should read at its truth

Directions: "greater" (method > baseline), "less" (method < baseline), and, with a margin m
stated before the data, "not_below" (method >= baseline - m: "the method does not fall
below") and "not_above" (method <= baseline + m: "the method does not beat the baseline").
A margined row's test is of mean(d) = -m (or +m); it is supported when its CI lies entirely
on the claimed side of that value and the adjusted p clears alpha (docs/claims.md says why
"A does not beat B" is tested so). scoring.claims builds the rows; this module decides them.
"""

from __future__ import annotations

MIN_QUESTIONS = 10
ALPHA = 0.05  # family-wise level of the exact test, after the correction
DIRECTIONS = {
    "greater": "method > baseline",
    "less": "method < baseline",
    "not_below": "method >= baseline - margin",  # non-inferiority: "A does not fall below B"
    "not_above": "method <= baseline + margin",  # "A does not beat B" (by more than the margin)
}
MARGINED = {"not_below": -1.0, "not_above": 1.0}  # direction -> the sign of its null shift


def test_of(direction: str, margin: float | None, where: str = "claim") -> float:
    """The null shift of a claim's test (0, or -/+margin for a margined direction), checked:
    an unknown direction, a margined one without a margin stated before the data, or a
    margin on a plain one is one line naming `where`."""
    if direction not in DIRECTIONS:
        raise ValueError(f"{where}: unknown claim direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    if direction not in MARGINED:
        if margin not in (None, 0, 0.0):
            raise ValueError(
                f"{where}: direction {direction!r} takes no margin (got {margin!r}); "
                "a margin is for not_below / not_above"
            )
        return 0.0
    if margin is None or isinstance(margin, bool) or not isinstance(margin, int | float) or not margin > 0:
        raise ValueError(
            f"{where}: direction {direction!r} is a non-inferiority test and needs a margin > 0 "
            f"stated before the data (e.g. margin: 0.03), got {margin!r}"
        )
    return MARGINED[direction] * float(margin)


def true_verdict(direction: str, margin: float | None, truth: float) -> str:
    """The verdict a row would read if its true difference (method minus baseline) were known:
    "inconclusive" at the null value itself (0, or the margin's -m / +m), where both
    "supported" and "contradicted" are false verdicts. A "not_below" row whose methods are
    equal (truth 0 > -m) should read "supported"."""
    null = test_of(direction, margin)
    if truth == null:
        return "inconclusive"
    return "supported" if (truth > null) == (direction in ("greater", "not_below")) else "contradicted"


def verdict(
    ci_low: float,
    ci_high: float,
    n_questions: int,
    p_adjusted: float,
    alpha: float = ALPHA,
    min_questions: int = MIN_QUESTIONS,
    direction: str = "greater",
    margin: float | None = None,
) -> str:
    """supported / contradicted / inconclusive: the CI excludes the null value (0, or the
    margin's side: -margin for not_below, +margin for not_above) and the test rejects."""
    null = test_of(direction, margin)
    if n_questions < min_questions or not p_adjusted <= alpha:
        return "inconclusive"
    above, below = ci_low > null, ci_high < null
    if above or below:
        return "supported" if above == (direction in ("greater", "not_below")) else "contradicted"
    return "inconclusive"
