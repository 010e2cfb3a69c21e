"""Bad input reaches the user as a clear error before anything half-done is written."""

from __future__ import annotations

import pytest
import yaml

from tests.workflow.conftest import copy_repo, retrace, snakemake, write_config


@pytest.fixture
def repo(tmp_path):
    return copy_repo(tmp_path / "repo")


def test_unknown_config_key_names_it_and_the_valid_ones(repo):
    cfg = repo / "config" / "config.yaml"
    cfg.write_text(yaml.safe_dump({"experiment": "plumbing", "mirorr": "/data"}))
    proc = snakemake(repo, "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        "'mirorr'" in out
        and "estimate, experiment, gpu_model, gpu_partition, max_runtime, mirror, overrides" in out
    )


def test_unknown_override_names_the_key(repo):
    write_config(repo, overrides=["method.sampling.temprature=0.3"])
    proc = snakemake(repo, "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "temprature" in out and "temperature" in out


def test_missing_mirror_says_how_to_point_at_one(repo):
    out = repo / "results" / "data" / "gsm8k.jsonl"
    proc = retrace(repo, "data", "--dataset", "gsm8k", "--mirror", str(repo / "no-mirror"), "--out", str(out))
    assert proc.returncode != 0
    assert "mirror" in proc.stderr and "--config mirror=" in proc.stderr
    assert not out.exists() and not out.with_name("gsm8k.jsonl.prov.json").exists()


def test_model_with_wrong_sha256_is_refused_and_leaves_nothing(repo):
    path = repo / "config" / "model" / "smollm2-135m-q41.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["source"]["sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(cfg))
    out = repo / "results" / "models" / "smollm2-135m-q41" / "manifest.json"
    proc = retrace(repo, "model", "--model", "smollm2-135m-q41", "--out", str(out))
    assert proc.returncode != 0 and "sha256 mismatch" in proc.stderr
    assert not out.exists() and not (out.parent / "model.gguf").exists()
