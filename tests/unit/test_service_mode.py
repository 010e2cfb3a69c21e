"""Service mode for a GPU experiment: `retrace plan`/`retrace run --set backend=served` move the
runs onto clients of `retrace serve`, priced in their servers' GPU-hours; the server starts with
the experiment's settings (context first); a client refuses a server started shorter."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from retrace.app.launch import global_config
from retrace.backends import endpoint
from retrace.planning.plan import job_config, jobs

CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"
# a clone alone, 30 questions a dataset (a size known without the mirror)
CLONE = ["mirror=/nonexistent", "dataset.limit=30"]


@pytest.fixture
def no_mirror(monkeypatch):
    monkeypatch.delenv("RETRACE_MIRROR", raising=False)


def test_set_backend_served_makes_every_run_a_client_of_its_engines_server(no_mirror):
    served = jobs(global_config(CONFIG, "paper", [*CLONE, "backend=served"]))
    assert {j.backend for j in served} == {"served"}
    math7b = next(j for j in served if j.model == "qwen2.5-math-7b" and j.label == "best_of_n")
    engine = job_config(math7b)["backend"]["engine"]
    # the run's vLLM settings are now what its server must have; the engine behind it is vLLM
    assert engine["server"] == "vllm" and engine["max_model_len"] == 4096
    assert engine["gpu_memory_utilization"] == 0.6


def test_a_run_on_an_engine_without_a_server_cannot_be_served():
    from retrace.planning.plan import switched

    run = {"backend": "simulated", "models": ["m"]}
    with pytest.raises(
        ValueError, match=r"^experiment 'x': backend=served: a run on 'simulated' has no server"
    ):
        switched(run, (), "served", "x")
    assert switched({"backend": "vllm"}, ("a=1",), "served", "x") == (
        {"backend": "served"},
        ("backend.engine.server=vllm", "a=1"),
    )


def test_plan_check_passes_for_paper_in_service_mode(no_mirror, capsys):
    from retrace.cli import main

    assert main(["plan", "--experiment", "paper", "--set", "backend=served", "--check"]) == 0
    assert "paper: 675 jobs, 0 problems" in capsys.readouterr().out


def test_served_clients_are_priced_in_their_servers_gpu_hours(no_mirror):
    from retrace.planning.estimate import estimate_of
    from retrace.planning.parts import sized

    lines = {}
    for name, extra in (("vllm", []), ("served", ["backend=served"])):
        cfg = global_config(CONFIG, "paper", CLONE + extra)
        planned = jobs(cfg)
        est = estimate_of(planned, sized(planned, None, ("dataset.limit=30",)))
        lines[name] = est
    assert lines["served"].gpu_hours > 0 and lines["served"].cpu_hours == 0
    # the same work at the same stated rate, in GPU-hours (before: ~40x the hours at the CPU default)
    assert lines["served"].gpu_hours == pytest.approx(lines["vllm"].gpu_hours, rel=0.1)


def test_a_client_asks_no_gpu_unless_it_loads_a_reward_model(no_mirror):
    from retrace.planning.cluster import job_resources

    planned = jobs(global_config(CONFIG, "paper", [*CLONE, "backend=served"]))
    gpus = {
        (j.model, j.label): job_resources(j, None, ("dataset.limit=30",), planned)["gpu"]
        for j in planned
        if j.dataset == "math500" and j.seed == 0
    }
    assert gpus[("llama-3.1-8b-instruct", "refine")] == 0 and gpus[("qwen2.5-math-7b", "majority")] == 0
    assert gpus[("qwen2.5-math-7b", "best_of_n")] == 2  # Qwen2.5-Math-RM-72B on two GPUs of its own
    assert gpus[("llama-3.1-8b-instruct", "best_of_n")] == 1  # the PRM shared the policy's GPU: now its own


def record(engine: dict) -> dict:
    manifest = {"name": "m", "fingerprint": "f" * 64, "chat_template": None}
    return endpoint.record("http://127.0.0.1:1/v1", manifest, "vllm", engine, {}) | {"model": manifest}


def test_a_client_refuses_a_server_started_with_a_shorter_context():
    manifest = {"name": "m", "fingerprint": "f" * 64}
    client = {"server": "vllm", "max_model_len": 4096}
    why = endpoint.mismatch(record({"max_model_len": 2048}), manifest, client)
    assert why is not None and "started with max_model_len 2048, shorter than this job's 4096" in why
    assert "retrace serve --experiment" in why
    assert endpoint.mismatch(record({"max_model_len": 8192}), manifest, client) is None
    # a client that states no context takes any server; a server that states none runs the model's own
    assert endpoint.mismatch(record({"max_model_len": 2048}), manifest, {"server": "vllm"}) is None
    assert endpoint.mismatch(record({}), manifest, client) is None


def test_serve_takes_the_experiments_settings_for_its_model(no_mirror):
    from retrace.app.serve import engine_settings, experiment_settings

    stated = experiment_settings("paper", "qwen2.5-math-7b", "vllm")
    assert "engine.max_model_len=4096" in stated and "engine.gpu_memory_utilization=0.6" in stated
    assert engine_settings("vllm", stated)["max_model_len"] == 4096
    # the 1.5B's whole-history ablation needs 32k: the longest of its jobs is the server's
    assert "engine.max_model_len=32768" in experiment_settings("paper", "qwen2.5-1.5b-instruct", "vllm")
    with pytest.raises(
        ValueError, match="none of its generation jobs runs model 'qwen2.5-math-7b' on a llamacpp"
    ):
        experiment_settings("paper", "qwen2.5-math-7b", "llamacpp")


def test_one_server_spans_its_tensor_parallel_gpus(tmp_path):
    from retrace.app.serve import endpoint_files

    a = argparse.Namespace(gpus="0,1,2,3", backend="vllm", port=0, endpoint=tmp_path)
    assert endpoint_files(a, tp=2) == [(tmp_path / "gpu0-1.json", "0,1"), (tmp_path / "gpu2-3.json", "2,3")]
    assert endpoint_files(a)[1] == (tmp_path / "gpu1.json", "1")
    with pytest.raises(ValueError, match="do not split into servers of tensor_parallel_size 3"):
        endpoint_files(a, tp=3)
