"""The default run's numbers, pinned: a refactor must not change claims, results or tables.

The spine of the default experiment (`smoke`: every job of its runs, greedy, Maj@N, refinement
and its falsifiers, Maj@N' at equal compute, RM@N, beam, lookahead) goes through the real
stage code in process, data -> generate -> score -> diagnose -> claims -> report, on the
simulated engine instead of llama.cpp (instant answers, no model: backends/simulated.py), with
the bundled data sets (no mirror). The digests below are of what those stages publish:
each score record, each diagnostics record, claims.csv and the report's results.csv, less
what names a run rather than its numbers (provenance hashes, which hold the run's clock and
host; source hashes of the code that ran; file paths under the test's temporary folder).

If a change means to move a number, rerun with `RETRACE_PRINT_PINS=1 pytest -s` and paste
the printed digests; a change that does not mean to (a refactor) must leave them alone.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from retrace.planning.plan import Job, diagnosed, jobs
from retrace.stages import claims, data, diagnose, generate, report, score

# Answers of ~40 tokens (the rehearsal's TOKENS_MEAN): most fit the smoke budgets, a few are cut.
SIMULATED = ("backend.engine.tokens_mean=40",)
# Columns and keys that name one run's files (provenance hashes: clock and host) or the code that
# ran (`code`: the engine's source hashes in a scorer's identity, which change with any edit of
# its file, as rerun keys do), not numbers.
RUN_NAMES = {"evidence", "prov_sha256", "score_file", "provenance", "transcript", "generation_usage", "code"}

PINNED = {
    "claims.csv": "b6b4d35d0ecc33877b572f870734a54425286d9fd9b43dd3fa18822969cac59d",
    "results.csv": "e46b9b2272948fb3289943a575d69e70dfba4c923a5e567f94fe550a4f615cfb",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math/seed0/greedy.json": "7e5397e90913e67805597db252a979c5674a3bd9dfe0a284f2df9b325aef3410",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math/seed0/majority.json": "4134557acbb29cf7111b6f915601a9d61c47a131e0f87fd385acba644d618548",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/beam.json": "1ecf3231236fe42291af5a0980c5827ea1f328b7088fd5c5d3d3a87390deacb3",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/best_of_n.json": "7d3d3157ce23b53ed8d777d99105a8a57840ddec89ddd1bf611d844ab42f95c7",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/greedy.json": "1562def27d135314d03517758ab2d0b37c0fb3c8ba0414efb38bba1303b55d57",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/lookahead.json": "678459291b92a93c4e16f41acf6fa0815dc0b3a51714248a34a655da3ca875df",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/majority.json": "60bb855f8fa61a3030f55ce8af85ff873deb5ae4185e045537abdfb6b626f599",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/majority_eq.json": "2bd99e1cd55525f73610eb04a100e25c1a17a7bed22f120095b58bf99587d5a0",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine.json": "bd378f9f43d3384aeb1815dfbf98159924765fef281c9ea0a6083684e029a43b",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine_affirm.json": "4455fe8948b3dcedfe61170748ea500c1f10341fcf332e2deb3b3141b8ef290e",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine_nocritic.json": "6b50cbcd6bf595ba59e17b6d24808b79dcea12fd03b08ec903e56e84325ce3d4",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine_random.json": "e76ea3f2ccaffc7e365b2fc280e3f56b2520407adc9b3be4d14feddc44f92031",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_mc/seed0/greedy.json": "662254ec09cf9db4b22b0629960ed46a533caf01fcd3c42be6677cb7197bf52c",
    "scores/qwen2.5-coder-0.5b-q4km/simulated/smoke_mc/seed0/majority.json": "8040216843d2691b067ca851081eaed2024926754cc977751c9ce3328678bf6c",
    "diagnostics/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine.json": "61f01135bba119bfeaabd65473ec636a997545d565700e9a0e2ef5d28e6da568",
    "diagnostics/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine_affirm.json": "fd5dec1c7612d3a1f45e820e9a4111415469b3ef9f0efdafa75936b6335c67a7",
    "diagnostics/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine_nocritic.json": "4b233016685dd312dea90a9d2929e33a6a3b8c5ad660f364122d3a3288e1ddd9",
    "diagnostics/qwen2.5-coder-0.5b-q4km/simulated/smoke_math_mini/seed0/refine_random.json": "d6e595a96403fe69511a2e182513355ada82b0671c175280e2434dc8a55df10f",
}


def smoke_jobs() -> list[Job]:
    """The default experiment's jobs, moved onto the simulated engine."""
    return [
        replace(j, backend="simulated", overrides=j.overrides + SIMULATED)
        for j in jobs({"experiment": "smoke"})
    ]


def _manifest(root: Path, model: str) -> Path:
    path = root / "models" / model / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": model, "fingerprint": "f" * 64, "params": 494_032_768}))
    return path


def _generate_all(root: Path, all_jobs: list[Job]) -> dict[Job, Path]:
    """Generations of every job, equal-compute ones after the two jobs that price them."""
    gens: dict[Job, Path] = {}
    for job in sorted(all_jobs, key=lambda j: bool(j.equal_compute)):
        data_path = root / "data" / f"{job.dataset}.jsonl"
        if not data_path.exists():
            data.run(job.dataset, None, data_path)
        out = root / "generations" / f"{job.path}.jsonl"
        priced_by = None
        if job.equal_compute:  # (refine label, majority label): their generations price N'
            by_path = {j.path: p for j, p in gens.items()}
            refine, majority = (replace(job, label=x, equal_compute=()).path for x in job.equal_compute[:2])
            priced_by = (by_path[refine], by_path[majority])
        generate.run(job, data_path, _manifest(root, job.model), root / "cache", out, priced_by)
        gens[job] = out
    return gens


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("default_run")
    all_jobs = smoke_jobs()
    gens = _generate_all(root, all_jobs)
    scores, diags = [], []
    for job, gen in gens.items():
        data_path, manifest = root / "data" / f"{job.dataset}.jsonl", _manifest(root, job.model)
        scores.append(root / "scores" / f"{job.scored}.json")
        score.run(job, gen, data_path, manifest, scores[-1])
        if diagnosed(job):
            diags.append(root / "diagnostics" / f"{job.scored}.json")
            diagnose.run(job, gen, data_path, diags[-1])
    claims.run(scores, root / "report" / "claims.csv")
    report.run(scores, root / "report", claims=root / "report" / "claims.csv", diagnostics=diags)
    return root


def _plain(value, root: str):
    """A JSON value with run names dropped and the temporary folder's paths made relative."""
    if isinstance(value, dict):
        return {k: _plain(v, root) for k, v in sorted(value.items()) if k not in RUN_NAMES}
    if isinstance(value, list):
        return [_plain(v, root) for v in value]
    return value.replace(root, "<run>") if isinstance(value, str) else value


def _csv_digest(path: Path) -> str:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = io.StringIO()
    keep = [c for c in rows[0] if c not in RUN_NAMES] if rows else []
    writer = csv.DictWriter(out, keep, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return hashlib.sha256(out.getvalue().encode()).hexdigest()


def _json_digest(path: Path, root: Path) -> str:
    text = json.dumps(_plain(json.loads(path.read_text()), str(root)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def digests(root: Path) -> dict[str, str]:
    out = {name: _csv_digest(root / "report" / name) for name in ("claims.csv", "results.csv")}
    for kind in ("scores", "diagnostics"):
        for path in sorted((root / kind).rglob("*.json")):
            if not path.name.endswith(".prov.json"):
                out[f"{kind}/{path.relative_to(root / kind)}"] = _json_digest(path, root)
    return out


def test_default_run_outputs_are_pinned(default_run):
    found = digests(default_run)
    if os.environ.get("RETRACE_PRINT_PINS"):
        print(json.dumps(found, indent=4))
    assert found == PINNED
