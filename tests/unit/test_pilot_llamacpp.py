"""`retrace pilot` end to end on the llama.cpp backend with the tests' SmolLM2 (the `plumbing`
experiment's engine): measured rates written where the next estimate reads them."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_the_pilot_measures_the_plumbing_experiment_and_resizes_its_grid(smollm2_manifest, tmp_path, capsys):
    pytest.importorskip("xllamacpp")
    from retrace.cli import main

    results = tmp_path / "results"
    (results / "models" / "smollm2-135m-q40").mkdir(parents=True)
    (results / "models" / "smollm2-135m-q40" / "manifest.json").write_text(json.dumps(smollm2_manifest))
    argv = ["pilot", "--experiment", "plumbing", "--results", str(results), "--requests", "2"]
    assert main([*argv, "--decode-tokens", "4"]) == 0
    result = json.loads((results / "pilot" / "smollm2-135m-q40" / "llamacpp.json").read_text())
    (rate,) = result["rates"]  # greedy and Maj@N: one role, the sample
    assert rate["role"] == "sample" and rate["requests"] == 2 and rate["generated_tokens"] == 2 * 4
    assert rate["context_tokens"] > 50 and rate["decode_tok_s"] > 0 and rate["prefill_tok_s"] > 0
    assert result["engine"]["n_ctx"] == 2048 and result["device"] == "cpu"
    out = capsys.readouterr().out
    assert "pilot: smollm2-135m-q40 on llamacpp (cpu) sample:" in out
    assert "assumed: estimate:" in out and "pilot: estimate:" in out and "measured by probe" in out
