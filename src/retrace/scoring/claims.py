"""Claims as gates: a verdict per paper claim from paired per-question results.

    a = [{"q1": True, "q2": False, ...}, ...]   # method A: one mapping per seed
    b = [{"q1": False, "q2": False, ...}]       # baseline B on the same questions
    row = claim_row("refinement beats Maj@N", "qwen", "math500", "refine", "maj4", a, b,
                    evidence=[prov_hash_a, prov_hash_b])
    write_claims_csv([row, ...], "results/report/claims.csv")

How the numbers are made (docs/claims.md says why, and what it costs in power):
- Seeds (scoring.seeds): which seeds count is decided from the design, before any score is
  read (the `deterministic` pair of compare: retrace.scoring.run_facts.deterministic_by_design
  for the spine, the families' own rules for DRR and ART). A temperature-0 method that chooses
  nothing by seed is one draw per question: its seed 0 counts, once, and the row's `note` says
  how its other seeds compare. A sampled method's seeds are independent draws and all count,
  unless the data show them copies (identical on >= 98 % of the questions: the seed never
  reached the engine): then seed 0 counts, once, and the note says so. A question's score is
  the mean over the counted seeds; questions are the unit. mean +- sd over seeds of each
  side's accuracy is reported too.
- p_value: the exact paired sign-flip test of mean(A - B) = 0 on the per-question
  differences (stats.sign_flip_exact) when both sides count as many seeds (with one seed a
  side it is the exact McNemar test); when they differ (a temperature-0 baseline against
  sampled seeds) and the scores are 0/1, the larger of it and the stratified exact test's
  p-value (scoring.seeds: each test fails under a null the other holds). `test` names it.
  A non-inferiority row ("A does not beat B": direction not_above/not_below with a `margin`
  stated before the data) tests mean(A - B) = +-margin instead.
- ci_low/ci_high: an APPROXIMATE interval (`ci_method` says so): the sign-flip test's normal
  approximation inverted over shifts, with Agresti-Min pseudo-pairs scaled to the score's
  range (`score_range`) so that it is never zero-width and the same in any units
  (stats.paired_mean_ci), at the level the row is judged at (`ci_level`): 1 - alpha
  alone, 1 - alpha / (m - rank) inside a Holm family; sd_diff keeps it recomputable. It is
  not the exact test's inversion, so the verdict asks both (below).
- p_adjusted: `adjust` corrects the p-values of all rows of one experiment together
  (Holm 1979, family-wise error rate; `correction` names it and the family size). A row
  without a p-value counts as p = 1 (it is in the family, and inconclusive). A row made
  alone (claim_row) is a family of one: p_adjusted = p_value, correction "none". An
  experiment that pre-registers primary claims (`claims.primary`) splits alpha over two
  families, primary and exploratory (`adjust`); the experiment's error rate stays <= ALPHA.
- verdict: a claim reads "method > baseline" (direction "greater"), "method < baseline"
  ("less", e.g. the falsifier "always-affirm falls below Maj@N"), or, with a margin m,
  "method >= baseline - m" ("not_below") / "method <= baseline + m" ("not_above"). It is
  "supported" when the CI lies entirely on the claimed side of the null value (0, or -m / +m)
  AND p_adjusted <= ALPHA, "contradicted" when the CI lies entirely on the other side AND
  p_adjusted <= ALPHA, else "inconclusive";
  also "inconclusive" with fewer than `min_questions` questions or without a p-value.
- Scores must be finite: a NaN or infinite score is refused, naming the question (the
  claims stage names the file too: run_facts.check_finite), never tested.
- subset: "full", or the subset the questions were (`limit=20`: `retrace run --limit 20`
  or a dataset config's own limit); a row on a subset says so in its note
  (run_facts.mark_subset).
- engine: what produced the scores, from the runs' own records (never the config's backend
  name alone): "simulated" when any part was simulated (retrace rehearse; the row's note
  names the parts): such a verdict says what the design can detect, nothing about the models.
Not covered: seeds of A and B are not paired with each other. Calibrated on simulated
nulls of each shipped experiment's own design by benchmarks/claims_calibration.py
(`make calibrate`), false "supported" and false "contradicted" alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retrace.scoring.seeds import counted_seeds, seeds_test
from retrace.scoring.stats import holm, holm_levels, paired_mean_ci
from retrace.scoring.verdicts import ALPHA, DIRECTIONS, MIN_QUESTIONS, test_of, verdict
from retrace.util.atomic import atomic_open

COLUMNS = (
    "claim",
    "model",
    "dataset",
    "method",
    "baseline",
    "baseline_budget",
    "direction",
    "delta",
    "ci_low",
    "ci_high",
    "ci_level",
    "ci_method",
    "sd_diff",
    "score_range",
    "margin",
    "p_value",
    "p_adjusted",
    "correction",
    "test",
    "verdict",
    "n_questions",
    "wins",
    "ties",
    "losses",
    "acc_method",
    "acc_method_sd",
    "acc_baseline",
    "acc_baseline_sd",
    "n_seeds_method",
    "n_seeds_baseline",
    "flops_method",
    "flops_baseline",
    "delta_tflops_per_problem",
    "paper_delta_tflops",
    "gain_per_1e3_tflops",
    "note",
    "subset",
    "engine",
    "evidence",
)
Runs = Sequence[Mapping[str, float]]  # one {question id: score} per seed
# What ci_low/ci_high are (stats.paired_mean_ci): not the exact test's inversion.
CI_METHOD = "approximate: sign-flip normal approximation, Agresti-Min pseudo-pairs"

# The paper's claims (arXiv:2608.05643) as (claim, method label, baseline label, direction),
# with the labels an experiment is expected to use; pass your own list where labels differ.
# The last is the review's falsifier: if always-affirm refinement does NOT fall below Maj@N,
# the gain is not caused by the critique signal.
PAPER_CLAIMS = (
    ("beats greedy", "refine", "greedy", "greater"),
    ("beats Maj@N", "refine", "majority", "greater"),
    ("refining beats resampling at equal compute (effective)", "refine", "majority_eq", "greater"),
    ("refining beats resampling at equal compute (nominal)", "refine", "majority_eq_nominal", "greater"),
    ("the critique stage adds accuracy (vs no critic)", "refine", "refine_nocritic", "greater"),
    ("the critique signal drives the gain (vs always-affirm)", "refine", "refine_affirm", "greater"),
    ("a real critic beats a random-text critic", "refine", "refine_random", "greater"),
    ("beats RM@N", "refine", "best_of_n", "greater"),
    ("beats step-level beam search", "refine", "beam", "greater"),
    ("beats lookahead search", "refine", "lookahead", "greater"),
    ("always-affirm refinement falls below Maj@N", "refine_affirm", "majority", "less"),
    # an ablation the paper never ran: its latest-trace conditioning against the whole history
    ("refining the latest trace vs the whole history", "refine", "refine_full", "greater"),
)

# The controls of `make controls` (config/experiment/controls.yaml), added by `--controls`:
# a known effect the engine must find (self-consistency over greedy, Wang et al. 2023,
# arXiv:2203.11171) and an A/A comparison it must not call either way: one sampled answer
# against another of the same method with other per-request seeds (samples 1 and 0 of Maj@N,
# stages/claims.single_samples).
CONTROL_CLAIMS = (
    ("positive control: Maj@N beats greedy", "majority", "greedy", "greater"),
    (
        "negative control (A/A): one sample vs another, other seeds",
        "majority#sample1",
        "majority#sample0",
        "greater",
    ),
)


def _matrix(runs: Runs) -> tuple[list[str], np.ndarray]:
    """(sorted question ids, seeds x questions scores); every seed must cover the same questions."""
    if not runs:
        raise ValueError("no runs to compare")
    ids = sorted(runs[0])
    for r in runs[1:]:
        if len(r) != len(ids) or any(q not in r for q in ids):
            raise ValueError(f"seeds cover different questions: {sorted(set(ids) ^ set(r))[:5]} ...")
    m = np.array([np.fromiter(map(r.__getitem__, ids), float, len(ids)) for r in runs])
    bad = np.argwhere(~np.isfinite(m))
    if len(bad):
        seed, q = bad[0]
        raise ValueError(f"question {ids[q]!r}: non-finite score {m[seed, q]} (seed {seed}); refused")
    return ids, m


def per_question(runs: Runs) -> dict[str, float]:
    """Mean score of each question over the seeds; every seed must cover the same questions."""
    ids, m = _matrix(runs)
    return dict(zip(ids, m.mean(axis=0).tolist()))


def compare(a_runs: Runs, b_runs: Runs, **options) -> dict:
    """Paired comparison of method A against baseline B; the numeric columns of a claims row.
    `options` are compare_matrices': an unknown keyword (a misspelt option) is a TypeError,
    never silently ignored."""
    (ids_a, ma), (ids_b, mb) = _matrix(a_runs), _matrix(b_runs)
    if ids_a != ids_b:
        raise ValueError(
            f"method and baseline cover different questions: {sorted(set(ids_a) ^ set(ids_b))[:5]} ..."
        )
    return compare_matrices(ma, mb, **options)


def compare_matrices(
    ma: np.ndarray,
    mb: np.ndarray,
    min_questions: int = MIN_QUESTIONS,
    direction: str = "greater",
    alpha: float = ALPHA,
    deterministic: tuple[bool, bool] = (False, False),
    repeatable: tuple[bool | None, bool | None] = (None, None),
    margin: float | None = None,
    score_range: float = 1.0,
) -> dict:
    """`compare` on (seeds x questions) score matrices over the same questions, in order.
    `deterministic`: whether each side is one draw by design (run_facts.deterministic_by_design);
    `repeatable`: whether each side's engine ran in its deterministic mode (None: not known);
    `margin`: a not_below / not_above claim's margin (test_of); `score_range`: the span of one
    question's score (1 for 0/1, 1 + k for FS(k)): the CI's pseudo-pairs are in its units."""
    shift = test_of(direction, margin)
    (da, note_a), (db, note_b) = (
        counted_seeds(m, det, side, rep)
        for m, det, side, rep in zip((ma, mb), deterministic, ("method", "baseline"), repeatable, strict=True)
    )
    a, b = da.mean(axis=0), db.mean(axis=0)
    d = a - b
    n = len(d)
    p_value, test = seeds_test(da, db, shift)
    sd_diff = float(d.std())
    ci_low, ci_high = paired_mean_ci(float(d.mean()), sd_diff, n, 1 - alpha, score_range)
    sd = lambda accs: float(accs.std(ddof=1)) if len(accs) > 1 else 0.0
    accs_a, accs_b = ma.mean(axis=1), mb.mean(axis=1)
    notes = [f"fewer than {min_questions} questions" if n < min_questions else "", note_a, note_b]
    if margin is not None:
        notes.append(f"tested as {DIRECTIONS[direction]}, margin {margin:g} stated before the data")
    return {
        "delta": float(d.mean()),
        "ci_low": ci_low,
        "ci_high": ci_high,
        "ci_level": 1 - alpha,
        "ci_method": CI_METHOD,
        "sd_diff": sd_diff,
        "score_range": float(score_range),
        "margin": margin,
        "p_value": p_value,
        "p_adjusted": p_value,
        "correction": "none",
        "test": test,
        "direction": direction,
        "verdict": verdict(ci_low, ci_high, n, p_value, alpha, min_questions, direction, margin),
        "n_questions": n,
        "wins": int(np.sum(a > b)),
        "ties": int(np.sum(a == b)),
        "losses": int(np.sum(a < b)),
        "acc_method": float(accs_a.mean()),
        "acc_method_sd": sd(accs_a),
        "acc_baseline": float(accs_b.mean()),
        "acc_baseline_sd": sd(accs_b),
        "n_seeds_method": len(ma),
        "n_seeds_baseline": len(mb),
        "note": "; ".join(filter(None, notes)),
    }


def claim_row(
    claim: str,
    model: str,
    dataset: str,
    method: str,
    baseline: str,
    a_runs: Runs,
    b_runs: Runs,
    evidence: Sequence[str] = (),
    **options,
) -> dict:
    """One claims.csv row; `evidence` are the provenance hashes of the scores compared."""
    return {
        "claim": claim,
        "model": model,
        "dataset": dataset,
        "method": method,
        "baseline": baseline,
        **compare(a_runs, b_runs, **options),
        "evidence": list(evidence),
    }


def gains(a_runs: Runs, b_runs: Runs) -> list[dict[str, float]]:
    """Per-question gain of A over B as one 'run' (seeds averaged first)."""
    qa, qb = per_question(a_runs), per_question(b_runs)
    return [{q: qa[q] - qb[q] for q in qa}]


def weaker_gains_more(weak: tuple[Runs, Runs], strong: tuple[Runs, Runs], **options) -> dict:
    """ "Weaker models gain most" for one pair of models on the same questions.

    `weak` and `strong` are (method runs, baseline runs) of each model; the comparison is
    paired per question on the gains (A - B), so delta = gain(weak) - gain(strong).
    Which model is weaker must be fixed before the data are seen (the experiment file's
    `claims.weaker`): choosing it by the measured baseline accuracy and then subtracting that
    same measurement biases the gain difference upwards (regression to the mean).
    """
    # a gain spans [-1, 1] for 0/1 scores: the CI's pseudo-pairs in its units (stats.paired_mean_ci)
    return compare(gains(*weak), gains(*strong), **{"score_range": 2.0, **options})


def _number(x) -> float:
    return float(x) if x not in (None, "") else float("nan")


def _has_p(row: dict) -> bool:
    return not math.isnan(_number(row.get("p_value")))  # neither missing nor NaN


def row_margin(row: Mapping) -> float | None:
    """A row's margin (a CSV row's too: "" reads None)."""
    m = _number(row.get("margin"))
    return None if math.isnan(m) else m


def _recompute_ci(row: dict, level: float) -> None:
    """The row's CI at `level`, when it carries the CI's inputs (sd_diff, score_range: 1 when
    missing, a row written before it was recorded; stats.paired_mean_ci)."""
    n, sd, r = _number(row.get("n_questions")), _number(row.get("sd_diff")), _number(row.get("score_range"))
    if not (math.isnan(n) or math.isnan(sd)):
        scale = 1.0 if math.isnan(r) else r
        row["ci_low"], row["ci_high"] = paired_mean_ci(_number(row["delta"]), sd, int(n), level, scale)
        row["ci_level"] = level


@dataclass(frozen=True)
class Primary:
    """An experiment's pre-registered primary claims (`claims.primary` of its file): rows of
    these claims (on these datasets; empty: every dataset) form a Holm family at `alpha`."""

    claims: tuple[str, ...]
    alpha: float
    datasets: tuple[str, ...] = ()

    def __contains__(self, row: Mapping) -> bool:
        return row["claim"] in self.claims and (not self.datasets or row["dataset"] in self.datasets)


def adjust(
    rows: Sequence[dict],
    alpha: float = ALPHA,
    min_questions: int = MIN_QUESTIONS,
    primary: Primary | None = None,
) -> list[dict]:
    """Holm-correct the p-values of one experiment's rows and re-decide their verdicts.

    Every row is in a family; a row without a p-value counts as p = 1 and reads
    "inconclusive". Each CI is recomputed at the level Holm judges its row at
    (alpha / (m - rank)), so CI and test agree on the level. Rows read back from a CSV
    (strings) are accepted; a row without sd_diff (another CI method) keeps its CI.

    Families: one (every row at `alpha`), or, with `primary` (the experiment's pre-registered
    primary claims), two: the primary rows at `primary.alpha` and the other, exploratory,
    rows at `alpha - primary.alpha`. The chance of any false "supported" in the experiment
    stays <= alpha (Bonferroni over the two families); the primary claims are judged in a
    family of their own size.
    """
    rows = [dict(r) for r in rows]
    if primary is None:
        _holm_family(rows, alpha, "", min_questions)
        return rows
    if not 0 < primary.alpha < alpha:
        raise ValueError(f"primary claims need 0 < primary alpha < {alpha:g}, got {primary.alpha!r}")
    _holm_family([r for r in rows if r in primary], primary.alpha, "primary ", min_questions)
    rest = [r for r in rows if r not in primary]
    _holm_family(rest, alpha - primary.alpha, "exploratory ", min_questions)
    return rows


def _holm_family(rows: list[dict], alpha: float, name: str, min_questions: int) -> None:
    """Holm over `rows` at `alpha`, in place: p_adjusted, correction, CI at its level, verdict."""
    if not rows:
        return
    ps = [_number(r.get("p_value")) if _has_p(r) else 1.0 for r in rows]
    adjusted, levels = holm(ps), holm_levels(ps, alpha)
    for r, p_adj, level in zip(rows, adjusted, levels, strict=True):
        r["p_adjusted"] = p_adj
        r["correction"] = f"holm over {len(rows)} {name}claims, alpha {alpha:g}"
        _recompute_ci(r, 1 - level)
        n = _number(r.get("n_questions"))
        r["verdict"] = verdict(
            _number(r.get("ci_low")),
            _number(r.get("ci_high")),
            0 if n != n else int(n),
            p_adj,
            alpha,
            min_questions,
            r.get("direction") or "greater",
            row_margin(r),
        )
        if not _has_p(r):
            r["verdict"] = "inconclusive"
            r["correction"] += "; no p-value: counted as p = 1"


def write_claims_csv(rows: Sequence[dict], path) -> None:
    """Write claims rows in COLUMNS order (other keys left out); evidence hashes are joined
    with ';'. Built with pandas, as results.csv is (retrace.report.tables.write_csv)."""
    import pandas as pd

    records = [{**r, "evidence": ";".join(r.get("evidence") or ())} for r in rows]
    frame = pd.DataFrame(records, columns=list(COLUMNS), dtype=object)
    with atomic_open(path) as f:
        frame.to_csv(f, index=False, lineterminator="\n")
