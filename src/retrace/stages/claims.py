"""Stage `claims`: the paper's claims as gates, from paired per-question results.

    python -m retrace claims --out results/report/claims.csv results/scores/.../seed0.json ...

For every (model, backend, dataset) and every (claim, method label, baseline label) in
retrace.scoring.claims.PAPER_CLAIMS whose two labels were both run, compares the per-question
correctness (seeds averaged) with a paired bootstrap CI and a McNemar/sign test; the
p-values of all rows (the family's own CSVs included) are Holm-corrected together and each
verdict needs both the CI and the corrected test (retrace.scoring.claims). "Weaker models gain most" compares refinement's gain over Maj@N between models.
Each row lists the provenance hashes of the score records it used.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from retrace.hashing import sha256_file
from retrace.plan import stage_sources
from retrace.provenance import Provenance, prov_path
from retrace.scoring.claims import PAPER_CLAIMS, adjust, claim_row, weaker_gains_more, write_claims_csv
from retrace.scoring.compute import compute_normalised_gain


def load_runs(score_files: list[Path]) -> tuple[dict, dict]:
    """({(model, backend, dataset): {label: [({qid: correct}, prov hash), ...per seed]}},
    {(model, backend, dataset, label): [effective FLOPs per seed]})."""
    runs: dict = defaultdict(lambda: defaultdict(list))
    flops: dict = defaultdict(list)
    for path in score_files:
        s = json.loads(Path(path).read_text())
        job = s["job"]
        flags = {p["id"]: float(p.get("chosen_correct", p["vote_correct"])) for p in s["per_problem"]}
        runs[(job["model"], job["backend"], job["dataset"])][job["method"]].append(
            (flags, sha256_file(prov_path(path))))
        flops[(job["model"], job["backend"], job["dataset"], job["method"])].append(s["flops"]["effective"])
    return runs, flops


def with_compute(row: dict, fa: list[float], fb: list[float]) -> dict:
    """Add mean effective FLOPs of both sides and accuracy points per 10^3 TFLOPs spent extra."""
    ma, mb = sum(fa) / len(fa), sum(fb) / len(fb)
    gain = compute_normalised_gain(row["acc_method"], row["acc_baseline"], ma, mb)
    return {**row, "flops_method": ma, "flops_baseline": mb, "gain_per_1e3_tflops": gain}


def claim_rows(runs: dict, flops: dict, **options) -> list[dict]:
    """Every PAPER_CLAIMS row whose two labels ran, then the weaker-model rows (uncorrected;
    `options` go to compare, e.g. n_boot)."""
    rows = []
    for (model, backend, dataset), labels in sorted(runs.items()):
        for claim, a, b in PAPER_CLAIMS:
            if a in labels and b in labels:
                row = claim_row(claim, model, dataset, a, b, [r for r, _ in labels[a]],
                                [r for r, _ in labels[b]],
                                evidence=[h for _, h in labels[a] + labels[b]], **options)
                rows.append(with_compute(row, flops[(model, backend, dataset, a)],
                                         flops[(model, backend, dataset, b)]))
    return rows + weaker_rows(runs, **options)


def weaker_rows(runs: dict, **options) -> list[dict]:
    """'Weaker models gain most': per dataset, each pair of models with refine and majority."""
    by_dataset = defaultdict(list)
    for (model, _backend, dataset), labels in runs.items():
        if "refine" in labels and "majority" in labels:
            base = sum(sum(r.values()) / len(r) for r, _ in labels["majority"]) / len(labels["majority"])
            by_dataset[dataset].append((base, model, labels))
    rows = []
    for dataset, models in sorted(by_dataset.items()):
        models.sort()  # weakest Maj@N first
        for (_, weak, wl), (_, strong, sl) in zip(models, models[1:]):
            pair = lambda l: ([r for r, _ in l["refine"]], [r for r, _ in l["majority"]])
            cmp = weaker_gains_more(pair(wl), pair(sl), **options)
            rows.append({"claim": "weaker models gain most", "model": f"{weak} vs {strong}",
                         "dataset": dataset, "method": "refine", "baseline": "majority", **cmp,
                         "evidence": [h for l in (wl, sl) for lab in ("refine", "majority")
                                      for _, h in l[lab]]})
    return rows


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


def run(score_files: list[Path], out: Path, extra: list[Path] = ()) -> int:
    """Claims of the spine's score files, then the rows of each family's claims CSV (`extra`:
    DRR, ART, ...), whose evidence hashes the audit follows through that CSV's own record."""
    prov = Provenance("claims", {"claims": [list(c) for c in PAPER_CLAIMS]}, stage_sources("claims"),
                      inputs=[str(p) for p in score_files] + [str(p) for p in extra])
    rows = claim_rows(*load_runs(score_files)) if score_files else []
    for path in extra:
        rows += read_extra(path)
    write_claims_csv(adjust(rows), out)  # one family: every claim of this experiment
    prov.write(out)
    return len(rows)
