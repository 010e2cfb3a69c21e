"""A small finished run for the export tests, built through the real provenance code: the real
data, claims and report stages; model, generation and score records written with `Provenance`
as those stages do, without loading a model."""

from __future__ import annotations

import json
from pathlib import Path

from retrace.planning.plan import stage_sources
from retrace.store.provenance import Provenance
from retrace.util.hashing import sha256_file

MODEL = {"name": "m", "fingerprint": "ab" * 32}


def _score(path: Path, label: str, correct: list[int]) -> dict:
    n = len(correct)
    acc = sum(correct) / n
    return {
        "job": {"model": "m", "backend": "fake", "dataset": "smoke_math", "method": label, "seed": 0},
        "n_problems": n,
        "n_samples": n,
        "accuracy": {"value": acc, "ci_low": 0.0, "ci_high": 1.0},
        "maj@k": {"1": {"value": acc, "ci_low": 0.0, "ci_high": 1.0}},
        "pass@k": {"1": acc},
        "tokens": {"prompt": 10, "cached_prompt": 0, "generated": 20, "per_problem_mean_generated": 2.0},
        "flops": {"nominal": 1e12, "effective": 1e12},
        "per_problem": [{"id": f"q{i}", "vote_correct": bool(c)} for i, c in enumerate(correct)],
    }


def build_run(root: Path) -> Path:
    """data → model manifest → two generations → two scores → claims → report, under root/results."""
    from retrace.stages import claims, data, report

    data.run("smoke_math", None, Path("results/data/smoke_math.jsonl"))
    weights = root / "weights.gguf"  # outside results: referenced by checksum, never copied
    weights.write_bytes(b"GGUF fake weights")
    manifest = Path("results/models/m/manifest.json")
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"name": "m", "sha256": sha256_file(weights)}))
    Provenance(
        "model",
        {"model": {"name": "m", "source": {"kind": "local", "path": str(weights)}}},
        stage_sources("model"),
        inputs=[str(weights)],
        extra={"model": MODEL},
    ).write(manifest)
    scores = []
    for label, correct in (("refine", [1] * 9 + [0]), ("greedy", [1] * 3 + [0] * 7)):
        gen = Path(f"results/generations/m/fake/smoke_math/{label}/seed0.jsonl")
        gen.parent.mkdir(parents=True)
        gen.write_text(json.dumps({"id": "q0", "text": "42"}) + "\n")
        cfg = {"method": {"name": label, "sampling": {"temperature": 0.0, "max_tokens": 8}}, "seed": 0}
        Provenance(
            "generate",
            cfg,
            stage_sources("report"),
            inputs=["results/data/smoke_math.jsonl", str(manifest)],
            extra={"model": MODEL, "usage": {"requests": 10}},
        ).write(gen)
        score = Path(f"results/scores/m/fake/smoke_math/{label}/seed0.json")
        score.parent.mkdir(parents=True)
        score.write_text(json.dumps(_score(score, label, correct)))
        Provenance("score", cfg, stage_sources("report"), inputs=[str(gen), str(manifest)]).write(score)
        scores.append(score)
    # A path with `@` (ART's edited-library runs, `art@feedback`): RO-Crate ids percent-encode it.
    art = Path("results/art/m/word_unscrambling/art@feedback/seed0.jsonl")
    art.parent.mkdir(parents=True)
    art.write_text(json.dumps({"id": "q0", "answer": "cat"}) + "\n")
    Provenance(
        "art_run",
        {"method": "art", "seed": 0},
        stage_sources("report"),
        inputs=[str(manifest)],
        extra={"model": MODEL},
    ).write(art)
    claims.run(scores, Path("results/report/claims.csv"))
    report.run(scores, Path("results/report"), Path("results/report/claims.csv"))
    return root / "results"


def exported(root: Path, **kwargs) -> Path:
    """Build the run under `root` (as the workflow does, from its root) and export it."""
    import pytest

    from retrace.export.crate import export

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # the workflow runs stages from the checkout root with relative paths
        return export(build_run(root), root / "run.crate.zip", **kwargs)
