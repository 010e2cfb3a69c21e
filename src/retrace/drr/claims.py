"""DRR's claims: which method beats which on which metric (Table 1, Figure 2), per dataset and
over the Overall set, each paired question by question (retrace.scoring.claims).

    runs[(model, dataset)][method] = [episodes of seed s, ...]; hashes likewise (prov sha256)
    rows = claims({**runs, **pooled(runs, seeds, hashes)[0]}, {...})   # claims.csv rows

Metrics per question come from drr/metrics.py; "none of the above" is read as the run's
`drr.nota` says, except for Acc(D), which always counts it as a decision to abstain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from retrace.drr import metrics
from retrace.scoring.claims import claim_row

OVERALL = "all"  # Table 1's "Overall (Combined)": every question of every dataset, one set

# Acc has two conventions for an abstention (drr/metrics.py): Table 1's numbers fit "scored as
# its last attempt", the paper's text says "not an answer" (wrong). Rows compared with Table 1
# ("... on accuracy") use the paper's numbers' convention; each has its "abstain = wrong" row
# beside (WRONG_SUFFIX), exploratory. FS scores an abstention 0 in both.
PAPER_ACC = "accuracy_last_attempt"
WRONG_SUFFIX = " (abstain = wrong)"

# (claim, method, baseline, metric, k): metric as metrics.per_question names it.
CLAIMS = [
    (f"DRR beats {name} on {label}", "drr", base, metric, k)
    for metric, k, label in ((PAPER_ACC, 1, "accuracy"), ("fs", 1, "FS(1)"), ("fs", 3, "FS(3)"))
    for base, name in (("cot", "CoT"), ("abstain", "Abstain"), ("selfcritic", "Self-Critic"))
]
CLAIMS += [
    ("DRR beats SFT-LoRA on accuracy", "drr", "sft_lora", PAPER_ACC, 1),
    ("DRR beats SFT-LoRA on FS(1)", "drr", "sft_lora", "fs", 1),
    ("DRR beats SFT-LoRA on FS(3)", "drr", "sft_lora", "fs", 3),
    # Section 5: "While the Abstain allows the LLM to opt-out, it performs worse than CoT, even
    # in FS(3)": CoT above Abstain, one-sided, paired over questions (exploratory, written
    # before any data; deviations/claims/drr_paper.yaml maps the sentence to this row).
    ("CoT beats Abstain on FS(3)", "cot", "abstain", "fs", 3),
]
CLAIMS += [
    ("DRR's Acc(D) above Abstain", "drr", "abstain", "acc_d", 1),
    ("DRR's Acc(D) above Self-Critic", "drr", "selfcritic", "acc_d", 1),
    (
        "self-critique does not beat CoT (CoT minus Self-Critic; Huang et al.)",
        "cot",
        "selfcritic",
        "accuracy",
        1,
    ),
    ("real DM beats shuffled-label DM on accuracy", "drr", "drr_shuffled", PAPER_ACC, 1),
    ("real DM beats shuffled-label DM on FS(3)", "drr", "drr_shuffled", "fs", 3),
]
CLAIMS += [(c + WRONG_SUFFIX, a, b, "accuracy", k) for c, a, b, m, k in CLAIMS if m == PAPER_ACC]
ACC_ABSTENTION = ("wrong", "both")
# Claims tested as other than "method > baseline" (scoring.verdicts.DIRECTIONS), margins fixed
# here, before any data. "Self-critique does not beat CoT" (Huang et al. 2024, "Large Language
# Models Cannot Self-Correct Reasoning Yet"; DRR §5 reports Self-Critic "dropping 3.1% in
# accuracy") is non-inferiority of CoT: CoT >= Self-Critic - 0.03. "supported": self-critique
# gains less than 3 points, a tie included, as the claim says; "contradicted": it beats CoT by
# more than 3 points. Tested as CoT > Self-Critic it read "inconclusive" on the outcome that
# fits the claim, and "supported" said more than the paper does. The margin is the size of
# the drop the paper reports, so a gain of that size would be the effect the claim denies.
TESTED_AS = {"self-critique does not beat CoT (CoT minus Self-Critic; Huang et al.)": ("not_below", 0.03)}


def tested_as(claim: str) -> dict:
    """{"direction", "margin"} of a DRR claim (TESTED_AS; else "greater"), checked: a
    margined direction without its margin is one line naming the claim."""
    from retrace.scoring.verdicts import test_of

    direction, margin = TESTED_AS.get(claim, ("greater", None))
    test_of(direction, margin, f"drr claim {claim!r}")
    return {"direction": direction, "margin": margin}


def claim_list(acc_abstention: str = "wrong") -> list[tuple]:
    """The claims a run writes, by `drr.acc_abstention` (config/drr/defaults.yaml): "wrong" (every
    Acc row scores an abstention wrong, one row per claim) or "both" (CLAIMS: Table 1's
    convention under the paper's claim names, "abstain = wrong" rows beside)."""
    if acc_abstention not in ACC_ABSTENTION:
        raise ValueError(f"drr.acc_abstention: {acc_abstention!r}; valid: {', '.join(ACC_ABSTENTION)}")
    if acc_abstention == "both":
        return CLAIMS
    return [
        (c, a, b, "accuracy" if m == PAPER_ACC else m, k)
        for c, a, b, m, k in CLAIMS
        if not c.endswith(WRONG_SUFFIX)
    ]


def decision_view(eps: list) -> list:
    """Episodes as Acc(D) reads them: a final "none of the above" is a decision to abstain,
    whatever Acc/FS score it as. Figure 2 needs this: Abstain (Llama3) has Acc(D) 67.2 against
    Acc 66.5 overall, so some NOTA answers counted as right abstain decisions."""
    from retrace.drr.episodes import nota_reading

    return [nota_reading(e, "abstain") for e in eps]


def claims(runs: Mapping, hashes: Mapping, acc_abstention: str = "wrong") -> list[dict]:
    """runs[(model, dataset)][method] = [episodes per seed]; hashes likewise (prov sha256);
    `acc_abstention` picks the claims (claim_list)."""
    rows = []
    for (model, dataset), methods in sorted(runs.items()):
        for claim, a, b, metric, k in claim_list(acc_abstention):
            if a not in methods or b not in methods:
                continue
            view = decision_view if metric == "acc_d" else list
            ra = [metrics.per_question(view(e), metric, k) for e in methods[a]]
            rb = [metrics.per_question(view(e), metric, k) for e in methods[b]]
            row = claim_row(
                claim,
                model,
                dataset,
                a,
                b,
                ra,
                rb,
                evidence=hashes[(model, dataset)][a] + hashes[(model, dataset)][b],
                score_range=1.0 + k if metric == "fs" else 1.0,  # FS(k) spans -k..1
                **tested_as(claim),
            )
            unit = {
                "accuracy": "0/1 correct, an abstention wrong",
                PAPER_ACC: "0/1 correct, an abstention scored as its last attempt (Table 1's convention)",
                "fs": f"FS points (+1/0/-{k:g})",
                "acc_d": "0/1 right decision",
            }[metric]
            row["note"] = "; ".join(filter(None, [row["note"], f"per-question {unit}"]))
            rows.append(row)
    return rows


def pooled(runs: Mapping, seeds: Mapping, hashes: Mapping) -> tuple[dict, dict, dict]:
    """The Overall set per model: for each method and seed that every dataset of the model has,
    the datasets' episodes concatenated (question ids are dataset-prefixed, so claims stay
    paired question by question); same shapes as runs/seeds/hashes, keyed (model, OVERALL)."""
    out_runs: dict = defaultdict(lambda: defaultdict(list))
    out_seeds: dict = defaultdict(lambda: defaultdict(list))
    out_hashes: dict = defaultdict(lambda: defaultdict(list))
    for model in sorted({m for m, _ in runs}):
        keys = sorted(k for k in runs if k[0] == model)
        for method in sorted(set.intersection(*(set(runs[k]) for k in keys))):
            common = set.intersection(*(set(seeds[k][method]) for k in keys))
            for seed in sorted(common):
                at = {k: seeds[k][method].index(seed) for k in keys}
                out_runs[(model, OVERALL)][method].append([e for k in keys for e in runs[k][method][at[k]]])
                out_seeds[(model, OVERALL)][method].append(seed)
                out_hashes[(model, OVERALL)][method] += [hashes[k][method][at[k]] for k in keys]
    return out_runs, out_seeds, out_hashes


def falsifier_notes(rows: list[dict]) -> list[str]:
    notes = []
    for r in rows:
        if r["baseline"] == "drr_shuffled":
            what = (
                "the real DM beats the shuffled-label DM beyond its CI"
                if r["verdict"] == "supported"
                else "the real DM does NOT beat the shuffled-label DM beyond its CI: the gain is not "
                "shown to come from learned behaviour"
            )
            notes.append(
                f"{r['model']} / {r['dataset']}: {r['claim']}: Δ = {r['delta']:.3f} "
                f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}], {r['verdict']} — {what}."
            )
    return notes
