"""generate -> score -> claims on the simulated engine, in process: the real stage code, no model.

A planted effect for refine-like label `majority_planted` must come out of the chain as a
"supported" claims row marked engine=simulated; greedy's temperature-0 seeds are identical."""

from __future__ import annotations

import csv
import json

import pytest

from retrace.planning.plan import Job
from retrace.stages import claims, generate, score
from retrace.store.data import write_problems
from retrace.util.records import Problem

MODEL = "smollm2-135m-q41"
OVER = ("method.sampling.max_tokens=4096",)  # above the drawn lengths: answers are not cut


@pytest.fixture()
def chain(tmp_path, monkeypatch):
    effects = tmp_path / "effects.yaml"
    effects.write_text("effects:\n  - {label: refine, points: 40}\n")
    data = tmp_path / "problems.jsonl"
    write_problems(
        data, [Problem(id=f"q{i:03d}", question=f"What is {i} + 1?", gold=str(i + 1)) for i in range(60)]
    )
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"name": MODEL, "fingerprint": "f" * 64, "params": 135_000_000}))
    over = OVER + (f"backend.engine.effects={effects}",)
    scores = {}
    for label, method, seed in [("greedy", "greedy", 0), ("greedy", "greedy", 1), ("refine", "majority", 0)]:
        job = Job(
            MODEL,
            "simulated",
            "math500",
            label,
            method,
            seed,
            over + (("method.n=3",) if method == "majority" else ()),
        )
        gen = tmp_path / "gen" / f"{label}{seed}.jsonl"
        generate.run(job, data, manifest, tmp_path / "cache" / f"{label}.sqlite", gen)
        scores[(label, seed)] = tmp_path / "scores" / label / "simulated" / f"seed{seed}.json"
        score.run(job, gen, data, manifest, scores[(label, seed)])
    return tmp_path, scores


def test_chain_marks_and_recovers_a_planted_effect(chain):
    root, scores = chain
    g0, g1 = (json.loads(scores[("greedy", s)].read_text())["per_problem"] for s in (0, 1))
    # temperature 0: identical seeds
    assert [p["vote_correct"] for p in g0] == [p["vote_correct"] for p in g1]
    out = root / "claims.csv"
    claims.run([scores[("greedy", 0)], scores[("greedy", 1)], scores[("refine", 0)]], out)
    with open(out) as f:
        [row] = list(csv.DictReader(f))
    assert (row["method"], row["baseline"], row["engine"]) == ("refine", "greedy", "simulated")
    assert row["verdict"] == "supported" and float(row["delta"]) > 0.2, row
