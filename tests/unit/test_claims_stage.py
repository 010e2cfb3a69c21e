"""The claims stage on constructed score files: pairing, compute columns, evidence hashes."""
from __future__ import annotations

import csv
import json

import pytest

from retrace.hashing import sha256_file
from retrace.provenance import prov_path
from retrace.stages import claims


def write_score(tmp_path, label, correct, flops, model="m"):
    path = tmp_path / f"{model}-{label}.json"
    path.write_text(json.dumps({
        "job": {"model": model, "backend": "b", "dataset": "d", "method": label, "seed": 0},
        "flops": {"effective": flops, "nominal": flops},
        "per_problem": [{"id": f"q{i}", "vote_correct": bool(c)} for i, c in enumerate(correct)]}))
    prov_path(path).write_text(json.dumps({"artifact": {"sha256": sha256_file(path)}}))
    return path


def test_claims_rows_pair_questions_and_price_the_gain(tmp_path):
    refine = write_score(tmp_path, "refine", [1] * 18 + [0] * 2, 3e15)
    greedy = write_score(tmp_path, "greedy", [1] * 6 + [0] * 14, 1e15)
    out = tmp_path / "claims.csv"
    claims.run([refine, greedy], out)
    (row,) = list(csv.DictReader(open(out)))
    assert (row["method"], row["baseline"], row["verdict"]) == ("refine", "greedy", "supported")
    assert (row["wins"], row["ties"], row["losses"]) == ("12", "8", "0")
    # 60 accuracy points for 2 x 10^3 TFLOPs more compute
    assert float(row["gain_per_1e3_tflops"]) == pytest.approx(30.0)
    assert set(row["evidence"].split(";")) == {sha256_file(prov_path(refine)), sha256_file(prov_path(greedy))}


def test_weaker_model_row_compares_gains_between_models(tmp_path):
    files = [write_score(tmp_path, "refine", [1] * 15 + [0] * 5, 2e15, "weak"),
             write_score(tmp_path, "majority", [1] * 5 + [0] * 15, 1e15, "weak"),
             write_score(tmp_path, "refine", [1] * 19 + [0], 2e15, "strong"),
             write_score(tmp_path, "majority", [1] * 18 + [0] * 2, 1e15, "strong")]
    out = tmp_path / "claims.csv"
    claims.run(files, out)
    rows = {r["claim"]: r for r in csv.DictReader(open(out))}
    weaker = rows["weaker models gain most"]
    assert weaker["model"] == "weak vs strong" and float(weaker["delta"]) == pytest.approx(0.5 - 0.05)
