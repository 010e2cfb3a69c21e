"""Claims as gates: a verdict per paper claim from paired per-question results.

    a = [{"q1": True, "q2": False, ...}, ...]   # method A: one mapping per seed
    b = [{"q1": False, "q2": False, ...}]       # baseline B on the same questions
    row = claim_row("refinement beats Maj@N", "qwen", "math500", "refine", "maj4", a, b,
                    evidence=[prov_hash_a, prov_hash_b])
    write_claims_csv([row, ...], "results/report/claims.csv")

How the numbers are made:
- Seeds are averaged per question first (a question's score is its mean correctness over
  the method's seeds), then questions are the resampling unit: seeds of one question are
  not independent questions. mean ± sd over seeds of each side's accuracy is reported too.
- delta = mean over questions of (A - B); its CI is the paired percentile bootstrap over
  questions (scoring/stats.py paired_bootstrap_diff).
- p_value: exact McNemar (stats.mcnemar_exact) when both sides are 0/1 per question (one
  seed each); otherwise the two-sided sign test on per-question differences, which is the
  same binomial test on the questions where A and B differ (scipy.stats.binomtest).
- p_adjusted: `adjust` corrects the p-values of all rows of one experiment together
  (Holm 1979, family-wise error rate; `correction` names it and the family size). A row
  made alone (claim_row) is a family of one: p_adjusted = p_value, correction "none".
- verdict: a claim reads "method > baseline" (direction "greater") or "method < baseline"
  ("less", e.g. the falsifier "always-affirm falls below Maj@N"). It is "supported" when
  the CI lies entirely on the claimed side of 0 AND p_adjusted <= ALPHA, "contradicted"
  when the CI lies entirely on the other side AND p_adjusted <= ALPHA, else "inconclusive";
  also "inconclusive" with fewer than `min_questions` questions, where a bootstrap over a
  handful of questions gives a CI far narrower than the evidence warrants.
Not covered: seeds of A and B are not paired with each other. Calibrated on simulated
outcomes by benchmarks/claims_calibration.py (`make calibrate`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from retrace.atomic import atomic_open
from retrace.scoring.metrics import DEFAULT_BOOT, DEFAULT_LEVEL, DEFAULT_SEED
from retrace.scoring.stats import binomial_two_sided, holm, mcnemar_exact, paired_bootstrap_diff

MIN_QUESTIONS = 10
ALPHA = 0.05  # family-wise level of the exact test, after the correction
DIRECTIONS = {"greater": "method > baseline", "less": "method < baseline"}
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
    "evidence",
)
Runs = Sequence[Mapping[str, float]]  # one {question id: score} per seed

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
)


def _matrix(runs: Runs) -> tuple[list[str], np.ndarray]:
    """(sorted question ids, seeds x questions scores); every seed must cover the same questions."""
    if not runs:
        raise ValueError("no runs to compare")
    ids = sorted(runs[0])
    for r in runs[1:]:
        if len(r) != len(ids) or any(q not in r for q in ids):
            raise ValueError(f"seeds cover different questions: {sorted(set(ids) ^ set(r))[:5]} ...")
    return ids, np.array([np.fromiter(map(r.__getitem__, ids), float, len(ids)) for r in runs])


def per_question(runs: Runs) -> dict[str, float]:
    """Mean score of each question over the seeds; every seed must cover the same questions."""
    ids, m = _matrix(runs)
    return dict(zip(ids, m.mean(axis=0).tolist()))


def seed_accuracy(runs: Runs) -> tuple[float, float]:
    """(mean, sd) over seeds of the accuracy; sd is 0.0 with one seed."""
    accs = _matrix(runs)[1].mean(axis=1)
    return float(accs.mean()), (float(accs.std(ddof=1)) if len(accs) > 1 else 0.0)


def paired_test(a: np.ndarray, b: np.ndarray) -> tuple[float, str]:
    """(p_value, test name): McNemar on 0/1 pairs, else the sign test on differences."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all():
        return mcnemar_exact(a == 1.0, b == 1.0)["p_value"], "mcnemar_exact"
    wins, losses = int(np.sum(a > b)), int(np.sum(a < b))
    return binomial_two_sided(wins, wins + losses), "sign"


def verdict(
    ci_low: float,
    ci_high: float,
    n_questions: int,
    p_adjusted: float,
    alpha: float = ALPHA,
    min_questions: int = MIN_QUESTIONS,
    direction: str = "greater",
) -> str:
    """supported / contradicted / inconclusive: the CI excludes 0 and the test rejects."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown claim direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    if n_questions < min_questions or not p_adjusted <= alpha:
        return "inconclusive"
    above, below = ci_low > 0, ci_high < 0
    if above or below:
        return "supported" if above == (direction == "greater") else "contradicted"
    return "inconclusive"


def compare(
    a_runs: Runs,
    b_runs: Runs,
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    min_questions: int = MIN_QUESTIONS,
    direction: str = "greater",
    alpha: float = ALPHA,
) -> dict:
    """Paired comparison of method A against baseline B; the numeric columns of a claims row."""
    (ids_a, ma), (ids_b, mb) = _matrix(a_runs), _matrix(b_runs)
    if ids_a != ids_b:
        raise ValueError(
            f"method and baseline cover different questions: {sorted(set(ids_a) ^ set(ids_b))[:5]} ..."
        )
    a, b = ma.mean(axis=0), mb.mean(axis=0)
    boot = paired_bootstrap_diff(a, b, n_boot, seed, level)
    p_value, test = paired_test(a, b)
    accs_a, accs_b = ma.mean(axis=1), mb.mean(axis=1)
    sd = lambda accs: float(accs.std(ddof=1)) if len(accs) > 1 else 0.0
    (acc_a, sd_a), (acc_b, sd_b) = (float(accs_a.mean()), sd(accs_a)), (float(accs_b.mean()), sd(accs_b))
    n = len(a)
    return {
        "delta": boot["diff"],
        "ci_low": boot["ci_low"],
        "ci_high": boot["ci_high"],
        "p_value": p_value,
        "p_adjusted": p_value,
        "correction": "none",
        "test": test,
        "direction": direction,
        "verdict": verdict(boot["ci_low"], boot["ci_high"], n, p_value, alpha, min_questions, direction),
        "n_questions": n,
        "wins": int(np.sum(a > b)),
        "ties": int(np.sum(a == b)),
        "losses": int(np.sum(a < b)),
        "acc_method": acc_a,
        "acc_method_sd": sd_a,
        "acc_baseline": acc_b,
        "acc_baseline_sd": sd_b,
        "n_seeds_method": len(a_runs),
        "n_seeds_baseline": len(b_runs),
        "note": f"fewer than {min_questions} questions" if n < min_questions else "",
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
    return compare(gains(*weak), gains(*strong), **options)


def _number(x) -> float:
    return float(x) if x not in (None, "") else float("nan")


def adjust(rows: Sequence[dict], alpha: float = ALPHA, min_questions: int = MIN_QUESTIONS) -> list[dict]:
    """Holm-correct the p-values of one experiment's rows and re-decide their verdicts.

    Rows read back from a CSV (strings) are accepted; a row without a p-value keeps its
    verdict and is left out of the family (its `correction` says so).
    """
    rows = [dict(r) for r in rows]
    family = [r for r in rows if r.get("p_value") not in (None, "")]
    adjusted = holm([_number(r["p_value"]) for r in family])
    for r, p_adj in zip(family, adjusted):
        r["p_adjusted"] = p_adj
        r["correction"] = f"holm over {len(family)} claims, alpha {alpha:g}"
        n = _number(r.get("n_questions"))
        r["verdict"] = verdict(
            _number(r.get("ci_low")),
            _number(r.get("ci_high")),
            0 if n != n else int(n),
            p_adj,
            alpha,
            min_questions,
            r.get("direction") or "greater",
        )
    for r in rows:
        if r.get("p_value") in (None, ""):
            r["correction"] = "not in the family (no p-value)"
    return rows


def write_claims_csv(rows: Sequence[dict], path) -> None:
    """Write claims rows in COLUMNS order (other keys left out); evidence hashes are joined
    with ';'. Built with pandas, as results.csv is (retrace.report.tables.write_csv)."""
    import pandas as pd

    records = [{**r, "evidence": ";".join(r.get("evidence") or ())} for r in rows]
    frame = pd.DataFrame(records, columns=list(COLUMNS), dtype=object)
    with atomic_open(path) as f:
        frame.to_csv(f, index=False, lineterminator="\n")
