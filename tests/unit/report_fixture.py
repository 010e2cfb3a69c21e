"""A small run's artifacts, built from synthetic records through the real code paths (no
model): model manifest and data file, generations, score files, refinement diagnostics,
claims.csv from the claims stage (with a DRR and an ART family CSV), and a wide family
section, each with a provenance record written by `retrace.store.provenance.Provenance`, so the
lineage is the shape a real run has. Used by test_report_paper.py and the browser test.

    run = build_run(tmp_path)   # {"scores": [...], "claims": path, "diagnostics": [...], "sections": [...]}
    build_report(run["scores"], out, run["claims"], run["diagnostics"], run["sections"])
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from fake_backend import ExactTask

from retrace.scoring.claims import claim_row, write_claims_csv
from retrace.scoring.refine_diagnostics import diagnose
from retrace.stages import claims as claims_stage
from retrace.store.provenance import Provenance
from retrace.util.atomic import write_json
from retrace.util.hashing import sha256_file
from retrace.util.records import Problem

QUESTIONS = 20
MODELS = ("qwen2.5-1.5b-instruct", "smollm2-135m-q41")
# (method, N, D, seeds, questions answered right) per model: refine wins clearly over greedy
RUNS = {"greedy": (1, None, (0,), 8), "majority": (4, None, (0, 1), 12), "refine": (4, 2, (0, 1), 18)}


def _source(path: Path, text: str, stage: str, config: dict, **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    Provenance(stage, config, [], extra=extra).write(path)
    return path


def _data(root: Path) -> Path:
    return _source(
        root / "data" / "math500.jsonl",
        "".join(json.dumps({"id": f"q{i}", "question": "?", "gold": "1"}) + "\n" for i in range(QUESTIONS)),
        "data",
        {"dataset": {"name": "math500", "limit": QUESTIONS}},
        data_fingerprint={"sha256": "cd" * 32, "rows": QUESTIONS},
    )


def _manifest(root: Path, model: str) -> Path:
    return _source(
        root / "models" / model / "manifest.json",
        json.dumps({"name": model}),
        "model",
        {"model": {"name": model}},
        model_fingerprint={"sha256": "ab" * 32, "params": 1_543_714_304},
    )


def _score(root: Path, model: str, method: str, seed: int, right: int, inputs: tuple) -> Path:
    n, depth, _, _ = RUNS[method]
    gen = _source(
        root / "generations" / model / method / f"seed{seed}.jsonl",
        "{}\n",
        "generate",
        {"model": {"name": model}, "method": {"name": method, "n": n, "depth": depth}, "seed": seed},
        tokens={"generated": 2500 * n},
    )
    Provenance(
        "generate",
        {"model": {"name": model}, "method": {"name": method, "n": n, "depth": depth}, "seed": seed},
        [],
        inputs=[str(p) for p in inputs],
    ).write(gen)
    right = right + seed % 2  # seeds differ a little
    acc = right / QUESTIONS
    score = {
        "job": {"model": model, "backend": "llamacpp", "dataset": "math500", "method": method, "seed": seed},
        "n_problems": QUESTIONS,
        "accuracy": {"value": acc, "ci_low": acc - 0.2, "ci_high": min(1.0, acc + 0.2)},
        "maj@k": {str(k): {"value": acc} for k in (1, 2, 4)},
        "pass@k": {"1": acc, "4": acc},
        "tokens": {"prompt": 4000 * n, "cached_prompt": 1000, "generated": 2500 * n * (1 + (depth or 0))},
        "flops": {"nominal": 3 * 10**12 * n, "effective": 2 * 10**12 * n * (1 + (depth or 0))},
        "per_problem": [{"id": f"q{i}", "vote_correct": i < right} for i in range(QUESTIONS)],
    }
    path = root / "scores" / model / method / f"seed{seed}.json"
    write_json(path, score)
    Provenance("score", {"task": "math500"}, [], inputs=[str(gen), *map(str, inputs)]).write(path)
    return path


def _family_claims(root: Path, name: str, claim: str, dataset: str, method: str, baseline: str) -> Path:
    """A family's claims CSV (DRR's, ART's) with its record, evidence = its episodes' record."""
    episodes = _source(root / name / "episodes.jsonl", "{}\n", name, {"family": name})
    ev = [sha256_file(Path(f"{episodes}.prov.json"))]
    a = [{f"q{i}": float(i < 15) for i in range(QUESTIONS)}]
    b = [{f"q{i}": float(i < 11) for i in range(QUESTIONS)}]
    path = root / name / "claims.csv"
    write_claims_csv([claim_row(claim, MODELS[0], dataset, method, baseline, a, b, evidence=ev)], path)
    Provenance(f"{name}_claims", {}, [], inputs=[str(episodes)]).write(path)
    return path


def _with_extra_columns(path: Path, inputs: list[Path]) -> None:
    """Add a column the report does not know (it must pass through unharmed)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = list(rows[0]) + ["answer_source_rate"]
    for r in rows:
        r.update(answer_source_rate=0.9)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    Provenance("claims", {}, [], inputs=[str(p) for p in inputs]).write(path)


def _diagnostics(root: Path, score: Path) -> Path:
    def row(pid, *depths):
        return {
            "problem_id": pid,
            "samples": [{"text": t} for t in depths[-1]],
            "extra": {"depths": [[{"text": t} for t in texts] for texts in depths]},
        }

    problems = {p: Problem(p, "q", "1") for p in "abcd"}
    rows = [
        row("a", ["2", "2", "1"], ["1", "1", "2"]),
        row("b", ["1", "1", "2"], ["2", "2", "1"]),
        row("c", ["1", "1", "1"], ["1", "1", "1"]),
        row("d", ["3", "4", "5"], ["1", "1", "5"]),
    ]
    job = {"model": MODELS[0], "backend": "llamacpp", "dataset": "math500", "method": "refine", "seed": 0}
    path = root / "diagnostics" / "refine_0.json"
    write_json(path, {"job": job, **diagnose(rows, problems, ExactTask(), n_boot=50)})
    Provenance("diagnose", {}, [], inputs=[str(score)]).write(path)
    return path


def _section(root: Path, drr_claims: Path) -> Path:
    """A DRR-like section whose table is as wide as DRR's (15 columns)."""
    cols = [
        "model",
        "dataset",
        "seed",
        "method",
        "n",
        "acc (abstain = wrong) %",
        "acc (abstain = last attempt) %",
        "abstain %",
        "FS(1)",
        "FS(3)",
        "Acc(D)",
        "DM precision",
        "DM recall",
        "DM FPR",
        "mean turns",
    ]
    rows = [
        [MODELS[0], "commonsenseqa", 0, m, 20, 75.0, 80.0, 5.0, 55.0, 35.0, 0.8, 0.912, 0.874, 0.113, 1.85]
        for m in ("cot", "abstain", "selfcritic", "drr")
    ]
    prov = [sha256_file(Path(f"{drr_claims}.prov.json"))] * len(rows)
    path = root / "drr" / "section.json"
    write_json(
        path,
        {
            "title": "DRR: discriminator-guided reasoning",
            "intro": "Synthetic rows.",
            "tables": [{"caption": "per run", "columns": cols, "rows": rows, "prov": prov}],
        },
    )
    Provenance("drr_report", {}, [], inputs=[str(drr_claims)]).write(path)
    return path


def build_run(root: Path) -> dict:
    root = Path(root)
    scores, data = [], _data(root)
    for model in MODELS:
        inputs = (_manifest(root, model), data)
        for method, (_, _, seeds, right) in RUNS.items():
            scores += [
                _score(root, model, method, s, right - 4 * (model != MODELS[0]), inputs) for s in seeds
            ]
    extra = [
        _family_claims(root, "drr", "DRR beats CoT on accuracy", "commonsenseqa", "drr", "cot"),
        _family_claims(root, "art", "ART beats few-shot on unseen tasks", "unseen tasks", "art", "fewshot"),
    ]
    claims = root / "report" / "claims.csv"
    claims_stage.run(scores, claims, extra)
    _with_extra_columns(claims, scores + extra)
    refine0 = next(s for s in scores if "refine" in s.parts and s.name == "seed0.json")
    return {
        "scores": scores,
        "claims": claims,
        "diagnostics": [_diagnostics(root, refine0)],
        "sections": [_section(root, extra[0])],
    }
