"""Service mode end to end on CPU: `retrace serve` (llama.cpp, deterministic) and the workflow's
generation jobs as its clients (backend `served`), against an in-process llama.cpp run.

Two copies of the repository run the same small experiment (SmolLM2 on 2 smoke_math problems,
greedy and a sampled Maj@2): one with the in-process deterministic llama.cpp engine, one with
no engine of its own, through a server on 127.0.0.1 started in the background. Their
generation files must agree in every text, answer, token count and request key; the server is
stopped at the end whether the test passes or not, and removes its endpoint file.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import TIMEOUT_SCALE, copy_repo, env_for, snakemake, write_config

pytestmark = pytest.mark.slow
pytest.importorskip("xllamacpp")
pytest.importorskip("openai")

MODEL = "smollm2-135m-q40"
LABELS = ("greedy", "majority")
# Fields that record how a run went, not what the model generated (tests/cluster/test_slurm.py).
RUN_SPECIFIC = ("latency_s", "cache_hit", "generation_usage", "request_cache_hits")


def experiment(backend: str, endpoint: Path | None = None) -> dict:
    overrides = ["method.sampling.max_tokens=32", "backend.engine.deterministic=true"]
    if endpoint is not None:
        overrides.append(f"backend.engine.endpoint={endpoint}")
    return {
        "runs": [
            {
                "models": [MODEL],
                "backend": backend,
                "datasets": ["smoke_math"],
                "methods": [
                    "greedy",
                    {"label": "majority", "method": "majority", "overrides": ["method.n=2"]},
                ],
                "seeds": [0],
                "overrides": overrides,
            }
        ]
    }


def configure(root: Path, backend: str, endpoint: Path | None = None) -> list[str]:
    """The copy's experiment `served_check` on `backend`; returns its generation targets."""
    (root / "config" / "experiment" / "served_check.yaml").write_text(
        yaml.safe_dump(experiment(backend, endpoint))
    )
    write_config(root, "served_check", ["dataset.limit=2"])
    return [f"results/generations/{MODEL}/{backend}/smoke_math/{label}/seed0.jsonl" for label in LABELS]


def without(obj):
    if isinstance(obj, dict):
        return {k: without(v) for k, v in obj.items() if k not in RUN_SPECIFIC}
    if isinstance(obj, list):
        return [without(v) for v in obj]
    return obj


def rows(path: Path) -> list[dict]:
    return [without(json.loads(line)) for line in path.read_text().splitlines()]


def start_server(root: Path, ep: Path) -> subprocess.Popen:
    """`retrace serve` in deterministic mode in the background; returns once the endpoint is written."""
    log = (root / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrace", "serve", "--model", MODEL, "--endpoint", str(ep)]
        + ["--set", "engine.deterministic=true"],
        cwd=root,
        env=env_for(root),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120 * TIMEOUT_SCALE
    while not ep.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"retrace serve did not start:\n{(root / 'serve.log').read_text()[-3000:]}")
        time.sleep(0.5)
    return proc


def stop_server(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def test_served_generations_equal_in_process_ones(tmp_path):
    local = copy_repo(tmp_path / "local")
    local_targets = configure(local, "llamacpp")
    snakemake(local, *local_targets)

    served = copy_repo(tmp_path / "served")
    ep = served / "results" / "serve" / "endpoint.json"
    served_targets = configure(served, "served", ep)
    snakemake(served, f"results/models/{MODEL}/manifest.json")  # the manifest the server loads
    proc = start_server(served, ep)
    try:
        snakemake(served, *served_targets)
        # A client whose mode differs from the server's is refused in one line, before any request.
        refused = subprocess.run(
            [sys.executable, "-m", "retrace", "generate", "--model", MODEL, "--backend", "served"]
            + ["--dataset", "smoke_math", "--method", "greedy", "--label", "greedy", "--seed", "0"]
            + ["--override", f"backend.engine.endpoint={ep}", "--override", "dataset.limit=2"]
            + [
                "--data",
                "results/data/smoke_math.jsonl",
                "--manifest",
                f"results/models/{MODEL}/manifest.json",
            ]
            + ["--cache", str(tmp_path / "other-cache"), "--out", str(tmp_path / "refused.jsonl")],
            cwd=served,
            env=env_for(served),
            capture_output=True,
            text=True,
            timeout=300,
        )
        server_alive_during_run = proc.poll() is None
    finally:
        code = stop_server(proc)
    assert server_alive_during_run and code == 0, (served / "serve.log").read_text()[-3000:]
    assert not ep.exists(), "a stopped server leaves no endpoint file"
    assert refused.returncode == 2 and "refusing endpoint" in refused.stderr, refused.stderr[-2000:]
    assert "deterministic=True" in refused.stderr.strip().splitlines()[-1]

    for mine, theirs in zip(served_targets, local_targets, strict=True):
        got, want = rows(served / mine), rows(local / theirs)
        assert len(got) == 2 and got == want, f"{mine} differs from the in-process {theirs}"
        record = json.loads((served / (mine + ".prov.json")).read_text())
        # The client ran every request on the server; its record names the server and its mode.
        assert record["server"]["served_model"].startswith(MODEL + "@")
        assert record["server"]["engine"]["deterministic"] is True
        assert record["server"]["engine"]["n_parallel"] == 1
        assert record["usage"]["engine_generated_tokens"] > 0 and record["usage"]["cache_hits"] == 0
