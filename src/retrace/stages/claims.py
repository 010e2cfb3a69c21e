"""Stage `claims`: the paper's claims as gates, from paired per-question results.

    python -m retrace claims --out results/report/claims.csv results/scores/.../seed0/<label>.json ...

For every (model, backend, dataset) and every (claim, method label, baseline label) in
retrace.scoring.claims.PAPER_CLAIMS whose two labels were both run, compares the per-question
correctness with the exact paired sign-flip test on seed means (McNemar with one seed a side;
beside it the stratified exact test, the larger p kept, when the sides count different seeds,
e.g. a temperature-0 baseline, whose seed 0 alone counts, decided from its config; a sampled
label whose seeds are copies in the scores counts once, with a note: scoring.seeds) and an
approximate CI (the sign-flip test's normal approximation with Agresti-Min pseudo-pairs; `ci_method`); the
p-values of all rows (the families' own CSVs included) are Holm-corrected together (or in
two families, primary and exploratory, when the experiment pre-registers `claims.primary`)
and each verdict needs both the CI and the corrected test (retrace.scoring.claims).
"Weaker models gain most" compares refinement's gain over Maj@N between models.
Each row lists the provenance hashes of the score records it used, the engine that made
them (from the score records: "simulated" for the simulated engine) and the subset of
questions (`--subset`, or the score records' own: `limit=20` after `retrace run --limit 20`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from retrace.planning.plan import stage_sources
from retrace.scoring.claims import (
    CONTROL_CLAIMS,
    PAPER_CLAIMS,
    Primary,
    adjust,
    claim_row,
    weaker_gains_more,
    write_claims_csv,
)
from retrace.scoring.compute import compute_normalised_gain
from retrace.scoring.run_facts import FULL, check_finite, mark_subset
from retrace.store.provenance import Provenance, prov_path
from retrace.util.hashing import sha256_file


def load_runs(score_files: list[Path]) -> tuple[dict, dict, dict, dict]:
    """({(model, backend, dataset): {label: [({qid: correct}, prov hash), ...per seed]}},
    {(model, backend, dataset, label): [effective FLOPs per seed]},
    {(model, backend, dataset, label): budget text},
    {(model, backend, dataset, label): facts}: `deterministic` (one draw by design), `engine`
    and `subset` sets, from the score records (stages/score.claims_facts))."""
    runs: dict = defaultdict(lambda: defaultdict(list))
    flops: dict = defaultdict(list)
    budgets: dict = {}
    facts: dict = defaultdict(
        lambda: {"deterministic": True, "repeatable": True, "engine": set(), "subset": set()}
    )
    for path in score_files:
        s = json.loads(Path(path).read_text())
        job = s["job"]
        flags = {p["id"]: float(p.get("chosen_correct", p["vote_correct"])) for p in s["per_problem"]}
        check_finite(flags, str(path))
        evidence = sha256_file(prov_path(path))
        labels = runs[(job["model"], job["backend"], job["dataset"])]
        labels[job["method"]].append((flags, evidence))
        key = (job["model"], job["backend"], job["dataset"], job["method"])
        flops[key].append(s["flops"]["effective"])
        _add_facts(facts[key], s, job["backend"])
        per_sample = s["flops"]["effective"] * len(s["per_problem"]) / max(1, s.get("n_samples", 1))
        for i, sample_flags in enumerate(single_samples(s["per_problem"])):
            labels[f"{job['method']}#sample{i}"].append((sample_flags, evidence))
            flops[(*key[:3], f"{job['method']}#sample{i}")].append(per_sample)
            _add_facts(
                facts[(*key[:3], f"{job['method']}#sample{i}")], {**s, "deterministic": False}, job["backend"]
            )
        if s.get("budget"):
            budgets[key] = s["budget"]["text"]
    return runs, flops, budgets, facts


def _add_facts(into: dict, score: dict, backend: str) -> None:
    """One seed's facts into its label's: one draw only if every seed is (a score record from
    before `deterministic` was recorded counts every seed), engines and subsets collected."""
    into["deterministic"] &= bool(score.get("deterministic", False))
    into["repeatable"] &= bool(score.get("bitwise_repeatable", False))
    into["engine"].add(score.get("engine") or engine_label(backend))
    into["subset"].add(score.get("subset") or FULL)


def single_samples(per_problem: list[dict], k: int = 2) -> list[dict]:
    """{qid: correct} of each of samples 0..k-1 alone (one sampled answer each), when every
    problem has k samples: the A/A control compares two of them (label "<label>#sample<i>").
    Samples i and j of a run have independent per-request seeds (methods/base.derive_seed), so
    they are the same method run twice with different seeds, at no extra generation."""
    if not per_problem or any(len(p.get("correct") or ()) < k for p in per_problem):
        return []
    return [{p["id"]: float(p["correct"][i]) for p in per_problem} for i in range(k)]


# The paper's ΔTFLOPs per problem of Ours (N=8, D=4) over a baseline, Table 4 of
# arXiv:2608.05643 as quoted by its review: ~728 for Qwen2.5-1.5B and 2,184-2,624 for the
# 7B/8B models over Maj@8; ~2,034 over RM@8 for Qwen2.5-Math-7B. Shown beside ours.
PAPER_DELTA_TFLOPS = {
    ("qwen2.5-1.5b-instruct", "majority"): "728",
    ("qwen2.5-math-7b", "majority"): "2184-2624 (7B/8B range)",
    ("llama-3.1-8b-instruct", "majority"): "2184-2624 (7B/8B range)",
    ("ministral-8b-instruct", "majority"): "2184-2624 (7B/8B range)",
    ("qwen2.5-math-7b", "best_of_n"): "2034",
}


def with_compute(row: dict, fa: list[float], fb: list[float]) -> dict:
    """Add mean effective FLOPs of both sides (dataset totals), the extra TFLOPs per problem and
    accuracy points per 10^3 TFLOPs per problem (the paper's units), and the paper's ΔTFLOPs."""
    ma, mb = sum(fa) / len(fa), sum(fb) / len(fb)
    n = row["n_questions"]
    gain = compute_normalised_gain(row["acc_method"], row["acc_baseline"], ma, mb, n)
    return {
        **row,
        "flops_method": ma,
        "flops_baseline": mb,
        "gain_per_1e3_tflops": gain,
        "delta_tflops_per_problem": (ma - mb) / n / 1e12,
        "paper_delta_tflops": PAPER_DELTA_TFLOPS.get((row["model"], row["baseline"]), "")
        if row["method"] == "refine"
        else "",
    }


def engine_label(backend: str) -> str:
    """A backend's engine label: "simulated" for the simulated engine (retrace rehearse), so a
    rehearsal's verdicts are never read as real ones; else the backend's name. Used only for
    score records that do not say which engine ran (stages/score.claims_facts does)."""
    return "simulated" if backend == "simulated" else backend


def row_engine(*engines: set | str) -> str:
    """claims.csv `engine` of a row from the engines that made its two sides: "simulated" when
    any part was, else the engines' names."""
    names = sorted({e for x in engines for e in ([x] if isinstance(x, str) else x)})
    return "simulated" if "simulated" in names else "+".join(names)


def _side_facts(facts: dict | None, key: tuple, backend: str) -> dict:
    default = {
        "deterministic": False,
        "repeatable": None,
        "engine": {engine_label(backend)},
        "subset": {FULL},
    }
    return (facts or {}).get(key) or default


def claim_rows(
    runs: dict,
    flops: dict,
    weaker: Sequence[tuple[str, str]] = (),
    budgets: dict | None = None,
    claims: Sequence[tuple[str, str, str, str]] = PAPER_CLAIMS,
    facts: dict | None = None,
    **options,
) -> list[dict]:
    """Every row of `claims` (default PAPER_CLAIMS) whose two labels ran, then the
    pre-registered weaker-model rows (uncorrected; `options` go to compare: min_questions, alpha).
    budgets[(model, backend, dataset, label)] is the budget text a row names for its baseline;
    facts[(model, backend, dataset, label)] what load_runs read of each label's runs (without:
    every seed counts, the engine is the backend's name, the subset full)."""
    rows, budgets = [], budgets or {}
    for (model, backend, dataset), labels in sorted(runs.items()):
        for claim, a, b, direction in claims:
            if a in labels and b in labels:
                fa, fb = (_side_facts(facts, (model, backend, dataset, x), backend) for x in (a, b))
                row = claim_row(
                    claim,
                    model,
                    dataset,
                    a,
                    b,
                    [r for r, _ in labels[a]],
                    [r for r, _ in labels[b]],
                    direction=direction,
                    evidence=[h for _, h in labels[a] + labels[b]],
                    deterministic=(fa["deterministic"], fb["deterministic"]),
                    repeatable=(fa["repeatable"], fb["repeatable"]),
                    **options,
                )
                row["baseline_budget"] = budgets.get((model, backend, dataset, b), "")
                row["engine"] = row_engine(fa["engine"], fb["engine"])
                mark_subset(row, "+".join(sorted(fa["subset"] | fb["subset"])))
                rows.append(
                    with_compute(
                        row, flops[(model, backend, dataset, a)], flops[(model, backend, dataset, b)]
                    )
                )
    return rows + weaker_rows(runs, weaker, budgets, facts, **options)


def weaker_rows(
    runs: dict,
    weaker: Sequence[tuple[str, str]],
    budgets: dict | None = None,
    facts: dict | None = None,
    **options,
) -> list[dict]:
    """'Weaker models gain most' for each pre-registered (weak, strong) pair, per dataset and
    backend where both models ran refine and majority. The pair comes from the experiment
    file, never from the measured accuracies (see claims.weaker_gains_more)."""
    rows = []
    for weak, strong in weaker:
        for (model, backend, dataset), wl in sorted(runs.items()):
            sl = runs.get((strong, backend, dataset))
            if model != weak or not sl or not all(l in x for l in ("refine", "majority") for x in (wl, sl)):
                continue
            pair = lambda l: ([r for r, _ in l["refine"]], [r for r, _ in l["majority"]])
            cmp = weaker_gains_more(pair(wl), pair(sl), **options)
            sides = [
                _side_facts(facts, (m, backend, dataset, x), backend)
                for m in (weak, strong)
                for x in ("refine", "majority")
            ]
            rows.append(
                {
                    "claim": "weaker models gain most",
                    "model": f"{weak} vs {strong}",
                    "dataset": dataset,
                    "method": "refine",
                    "baseline": "majority",
                    "baseline_budget": (budgets or {}).get((weak, backend, dataset, "majority"), ""),
                    **cmp,
                    "note": "; ".join(filter(None, [cmp["note"], "pre-registered pair"])),
                    "engine": row_engine(*(f["engine"] for f in sides)),
                    "evidence": [h for l in (wl, sl) for lab in ("refine", "majority") for _, h in l[lab]],
                }
            )
            mark_subset(rows[-1], "+".join(sorted(set().union(*(f["subset"] for f in sides)))))
    return rows


def parse_pair(text: str) -> tuple[str, str]:
    """'weak,strong' -> (weak, strong), refusing anything else."""
    parts = [x.strip() for x in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"--weaker wants 'WEAK,STRONG' (two different models), got {text!r}")
    return parts[0], parts[1]


def read_extra(path: Path) -> list[dict]:
    """Rows of a method family's own claims CSV (same columns; evidence joined with ';')."""
    import csv

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for lineno, r in enumerate(rows, 2):
        missing = [c for c in ("claim", "verdict", "evidence") if c not in r]
        if missing:
            raise ValueError(f"{path}:{lineno}: claims row lacks column(s) {missing}")
        r["evidence"] = [h for h in r["evidence"].split(";") if h]
    return rows


def override_subset(overrides: Sequence[str]) -> str:
    """The subset the run's global overrides cut every dataset to: "limit=N" for
    `dataset.limit=N` (what `retrace run --limit N` sets), else FULL."""
    limits = [o.partition("=")[2] for o in overrides if o.lstrip("+~").partition("=")[0] == "dataset.limit"]
    return f"limit={limits[-1]}" if limits and limits[-1] not in ("null", "None", "") else FULL


def run(
    score_files: list[Path],
    out: Path,
    extra: Sequence[Path] = (),
    weaker: Sequence[tuple[str, str]] = (),
    primary: Primary | None = None,
    controls: bool = False,
    subset: str = FULL,
) -> int:
    """Claims of the spine's score files, then the rows of each family's claims CSV (`extra`:
    DRR, ART, ...), whose evidence hashes the audit follows through that CSV's own record.
    `weaker`: the experiment's pre-registered (weak, strong) model pairs; `primary`: its
    pre-registered primary claims (scoring.claims.adjust); `controls`: add the positive and A/A
    control rows (CONTROL_CLAIMS) to the same family; `subset`: the run's global subset
    (`override_subset`: `retrace run --limit N`), recorded in provenance and on every row
    that records no subset of its own (a family's rows; a spine row whose datasets have no
    more questions than N, so that its scores say "full")."""
    claims = CONTROL_CLAIMS + PAPER_CLAIMS if controls else PAPER_CLAIMS
    prov = Provenance(
        "claims",
        {
            "claims": [list(c) for c in claims],
            "weaker": [list(w) for w in weaker],
            "primary": primary
            and {"claims": list(primary.claims), "datasets": list(primary.datasets), "alpha": primary.alpha},
            "subset": subset,
        },
        stage_sources("claims"),
        inputs=[str(p) for p in score_files] + [str(p) for p in extra],
    )
    rows = []
    if score_files:
        runs, flops, budgets, facts = load_runs(score_files)
        rows = claim_rows(runs, flops, weaker, budgets, claims, facts)
    for path in extra:
        rows += read_extra(path)
    for row in rows:  # the run's --limit on every row that records no subset of its own
        if row.get("subset") in (None, "", FULL) and subset != FULL:
            mark_subset(row, subset)
    # one family of every claim of this experiment, or primary + exploratory (alpha split)
    write_claims_csv(adjust(rows, primary=primary), out)
    prov.write(out)
    return len(rows)
