"""The engine's deterministic mode: what each backend does with it and where it is reported."""

from __future__ import annotations

import json

import pytest

from retrace.backends.base import BackendError, is_deterministic
from retrace.stages.score import repeatable

# An OpenAI client's request limits, as the code's defaults were (config/backend/openai.yaml states them).
TIMEOUTS = {"timeout_s": 600, "max_retries": 2}


def test_vllm_arguments_in_deterministic_mode():
    from retrace.backends.vllm import llm_arguments

    engine = {"enable_prefix_caching": True, "deterministic": True}
    on_cpu = llm_arguments({"hf_dir": "/m"}, engine, cuda=False)
    # No batch-invariant kernels on CPU: one sequence at a time, no reused prefixes.
    assert on_cpu["max_num_seqs"] == 1 and on_cpu["enable_prefix_caching"] is False
    # On CUDA the batch-invariant kernels keep batching and prefix caching.
    on_gpu = llm_arguments({"hf_dir": "/m"}, engine, cuda=True)
    assert "max_num_seqs" not in on_gpu and on_gpu["enable_prefix_caching"] is True
    assert llm_arguments({"hf_dir": "/m"}, {"enable_prefix_caching": True}, cuda=False) == {
        "model": "/m",
        "enable_prefix_caching": True,
        "enable_chunked_prefill": False,
    }


def test_openai_client_sends_one_request_at_a_time_and_no_prompt_cache(smollm2_manifest):
    pytest.importorskip("openai")
    from retrace.backends.openai import OpenAIBackend
    from retrace.util.records import Message, Request, Sampling

    req = Request(messages=(Message("user", "Hi"),), sampling=Sampling(max_tokens=2))
    det = OpenAIBackend(
        smollm2_manifest,
        {
            "base_url": "http://127.0.0.1:9/v1",
            "concurrency": 8,
            "deterministic": True,
            "server": "llamacpp",
            **TIMEOUTS,
        },
    )
    plain = OpenAIBackend(
        smollm2_manifest,
        {"base_url": "http://127.0.0.1:9/v1", "concurrency": 8, "server": "llamacpp", **TIMEOUTS},
    )
    try:
        assert det._pool._max_workers == 1 and plain._pool._max_workers == 8
        assert det._fields(req)[1]["cache_prompt"] is False
        assert "cache_prompt" not in plain._fields(req)[1]
    finally:
        det.close()
        plain.close()


def test_scores_say_whether_their_generations_repeat_bitwise():
    assert repeatable({"engine": {"name": "llamacpp", "engine": {"deterministic": True}}}) is True
    assert repeatable({"engine": {"name": "llamacpp", "engine": {"n_parallel": 16}}}) is False
    assert repeatable({}) is False  # records from before the mode existed
    with pytest.raises(BackendError, match="deterministic"):
        is_deterministic({"deterministic": "true"})


def test_results_csv_has_the_repeatable_column(tmp_path):
    from retrace.report.tables import columns, result_row

    score = {
        "job": {"model": "m", "dataset": "d", "method": "maj", "seed": 0},
        "n_problems": 2,
        "accuracy": {"value": 0.5, "ci_low": 0.0, "ci_high": 1.0},
        "tokens": {"prompt": 10, "cached_prompt": 0, "generated": 5},
        "flops": {"nominal": 1.0, "effective": 1.0},
        "bitwise_repeatable": True,
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(score))
    (tmp_path / "s.json.prov.json").write_text("{}")
    row = result_row(path)
    assert row["bitwise_repeatable"] is True and "bitwise_repeatable" in columns([row])
    del score["bitwise_repeatable"]
    path.write_text(json.dumps(score))
    assert result_row(path)["bitwise_repeatable"] is False
