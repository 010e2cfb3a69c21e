"""Hub artifacts (retrace.app.hub_artifacts): what an experiment's GPU jobs load from the hub
besides the policy models, materialised by a local rule; and the GPU side finding them with
the hub unreachable. The hub here is a pre-filled HF cache holding a tiny model of
Qwen2.5-Math-RM-72B's architecture (tests/unit/test_qwen_rm.py's) at a pinned commit, and an
endpoint nobody listens on."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retrace.app import hub_artifacts
from retrace.app.launch import global_config
from tests.unit.test_qwen_rm import tiny_qwen_rm  # noqa: F401  (the fixture)

CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"
SRC = Path(__file__).resolve().parents[2] / "src"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "tiny-org/tiny-rm"


def test_an_experiments_hub_artifacts_are_its_reward_models_and_drrs_backbone_and_base(monkeypatch):
    monkeypatch.delenv("RETRACE_MIRROR", raising=False)
    paper = hub_artifacts.experiment_artifacts(global_config(CONFIG, "paper", ["mirror=/nonexistent"]))
    assert {repo for repo, _ in paper.values()} == {
        "Qwen/Qwen2.5-Math-RM-72B",
        "RLHFlow/Llama3.1-8B-PRM-Deepseek-Data",
    }
    assert all(hub_artifacts.COMMIT.match(rev) for _, rev in paper.values())
    assert "Qwen--Qwen2.5-Math-RM-72B@a791b817acae" in paper
    drr = hub_artifacts.experiment_artifacts(global_config(CONFIG, "drr_paper", ["mirror=/nonexistent"]))
    assert {repo for repo, _ in drr.values()} == {"google/flan-t5-large", "meta-llama/Llama-3.1-8B-Instruct"}
    plumbing = hub_artifacts.experiment_artifacts(global_config(CONFIG, "plumbing", ["mirror=/nonexistent"]))
    assert plumbing == {}  # a CPU run: nothing to fetch


def test_an_unpinned_revision_is_refused_in_one_line(tmp_path):
    with pytest.raises(
        hub_artifacts.HubArtifactError, match=r"^hub artifact org/x: revision 'main' is not a pinned commit"
    ):
        hub_artifacts.materialise("org/x", "main", tmp_path / "x.json")


def offline_env(home: Path) -> dict:
    """The hub unreachable (the endpoint a port nobody listens on), the HF cache under `home`,
    and HF_HUB_OFFLINE=1 as the GPU-side rules set it (test_gpu_side_rules_ask_the_hub_nothing)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    return {
        **env,
        "HF_HOME": str(home),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(SRC),
    }


def test_gpu_side_rules_ask_the_hub_nothing():
    rules = Path(__file__).resolve().parents[2] / "workflow" / "rules"
    text = (rules / "generate.smk").read_text() + (rules / "drr.smk").read_text()
    text = text.replace("{{", "{").replace("}}", "}")  # an f-string's shell line reads the same
    shells = re.findall(
        r'"(\S+ \{PY\} -m retrace (?:generate|drr train|drr sft|\{params\.command\})[^"]*)"', text
    )
    assert len(shells) == 5 and all(s.startswith("HF_HUB_OFFLINE=1 {PY}") for s in shells)


LOAD = """
import sys
from retrace.engine.scorers import ScoreItem, build_scorer
from retrace.util.records import Problem
block = {"name": "hf_reward", "repo": sys.argv[1], "revision": sys.argv[2], "kind": "classifier",
         "auto_class": "AutoModel", "trust_remote_code": True, "squash": "none", "device": "cpu",
         "dtype": "float32", "batch_size": 2}
scorer = build_scorer({"scorer": block}, None)
[score] = scorer.score([ScoreItem(Problem("p", "What is 2+3?", "5"), "2+3 = 5")])
print("scored", score.value)
"""


def test_the_gpu_side_finds_a_materialised_reward_model_with_the_hub_unreachable(tiny_qwen_rm, tmp_path):
    home = tmp_path / "hf"
    repo_dir = home / "hub" / f"models--{REPO.replace('/', '--')}"
    shutil.copytree(tiny_qwen_rm, repo_dir / "snapshots" / COMMIT)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(COMMIT)
    env = offline_env(home)
    out = tmp_path / "results" / "hub" / f"{hub_artifacts.slug(REPO, COMMIT)}.json"
    # the local rule's command: the artifact at its pin, every file hashed, provenance beside
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrace",
            "hub-artifact",
            "--repo",
            REPO,
            "--revision",
            COMMIT,
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    manifest = json.loads(out.read_text())
    assert manifest["revision"] == COMMIT and "config.json" in manifest["files"]
    assert (
        Path(manifest["path"]) == repo_dir / "snapshots" / COMMIT
        and out.with_name(out.name + ".prov.json").exists()
    )
    # the GPU job: the scorer by repo and pinned commit, as RM@N's config names it, no network
    job = subprocess.run(
        [sys.executable, "-c", LOAD, REPO, COMMIT], env=env, capture_output=True, text=True, timeout=300
    )
    assert job.returncode == 0 and "scored" in job.stdout, job.stderr[-3000:]
    # without the artifact in the cache the same job fails (the hub is really out of reach)
    shutil.rmtree(repo_dir)
    gone = subprocess.run(
        [sys.executable, "-c", LOAD, REPO, COMMIT], env=env, capture_output=True, text=True, timeout=300
    )
    assert gone.returncode != 0
