"""Locked hub revisions (retrace.store.hub_lock) and the hub loaders that use them, offline:
the dataset loader runs `datasets.load_dataset` on a local directory in the hub layout
(parquet files built here from the bundled sets); the hub itself is never contacted (the
commit lookup is a stand-in, the model download is patched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrace.store import data, hub_lock, models
from retrace.tasks.base import BUNDLED_DIR

SHA_A, SHA_B = "a" * 40, "b" * 40


@pytest.fixture
def lock(tmp_path, monkeypatch):
    path = tmp_path / "hub.lock"
    monkeypatch.setenv("RETRACE_HUB_LOCK_FILE", str(path))
    monkeypatch.delenv("RETRACE_HUB_LOCK", raising=False)
    return path


def lookup(answer):
    calls = []

    def fake(kind, repo, revision):
        calls.append((kind, repo, revision))
        return answer

    fake.calls = calls
    return fake


def test_unpinned_and_unlocked_is_refused_with_what_to_do(lock):
    with pytest.raises(hub_lock.UnlockedRevision, match="RETRACE_HUB_LOCK=write") as e:
        hub_lock.resolve("dataset", "org/set", "main", lookup=lookup(SHA_A))
    assert "dataset:org/set" in str(e.value) and not lock.exists()


def test_first_locking_fetch_writes_the_lock_and_later_runs_use_it(lock, monkeypatch):
    first = lookup(SHA_A)
    monkeypatch.setenv("RETRACE_HUB_LOCK", "write")
    assert hub_lock.resolve("dataset", "org/set", "main", lookup=first) == SHA_A
    assert first.calls == [("dataset", "org/set", "main")]
    entry = json.loads(lock.read_text())["dataset:org/set"]
    assert entry["commit"] == SHA_A and entry["requested"] == "main"
    monkeypatch.delenv("RETRACE_HUB_LOCK")
    later = lookup(SHA_B)  # the branch moved on the hub: the lock still wins
    assert hub_lock.resolve("dataset", "org/set", None, lookup=later) == SHA_A and later.calls == []


def test_pin_that_disagrees_with_the_lock_is_refused(lock):
    hub_lock.resolve("model", "org/m", "main", write=True, lookup=lookup(SHA_A))
    assert hub_lock.resolve("model", "org/m", SHA_A) == SHA_A
    with pytest.raises(hub_lock.UnlockedRevision, match=f"pins {SHA_B} but .* locks {SHA_A}"):
        hub_lock.resolve("model", "org/m", SHA_B)
    assert hub_lock.resolve("model", "other/m", SHA_B) == SHA_B  # pinned, nothing locked


def test_hub_answer_that_is_not_a_commit_is_refused(lock):
    with pytest.raises(hub_lock.UnlockedRevision, match="not a commit sha"):
        hub_lock.resolve("dataset", "org/set", "main", write=True, lookup=lookup("main"))
    assert not lock.exists()


def test_hub_model_is_downloaded_at_the_locked_commit(lock, tmp_path, monkeypatch):
    import huggingface_hub

    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    (snapshot / "config.json").write_text("{}")
    got = []
    monkeypatch.setattr(
        huggingface_hub,
        "snapshot_download",
        lambda repo, revision: got.append((repo, revision)) or str(snapshot),
    )
    hub_lock.resolve("model", "org/m", None, write=True, lookup=lookup(SHA_A))
    cfg = {"name": "m", "params": 10, "source": {"kind": "hub"}, "hub": {"repo": "org/m", "revision": None}}
    manifest, _ = models.materialise(cfg, tmp_path / "out")
    assert got == [("org/m", SHA_A)] and manifest["hub_commit"] == SHA_A
    assert manifest["files"] == {"config.json": models.sha256_file(snapshot / "config.json")}


def hub_layout(root: Path, name: str) -> Path:
    """A local dataset repo in the hub layout: data/test-00000-of-00001.parquet."""
    import pandas as pd

    out = root / name
    (out / "data").mkdir(parents=True)
    rows = pd.read_json(BUNDLED_DIR / f"{name}.jsonl", lines=True)
    rows.to_parquet(out / "data" / "test-00000-of-00001.parquet")
    return out


@pytest.mark.parametrize("name", ["smoke_math", "smoke_mc"])
def test_hub_loader_reads_a_hub_layout_offline(lock, tmp_path, monkeypatch, name):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = hub_layout(tmp_path, name)
    cfg = {
        "name": name,
        "task": name,
        "source": "hub",
        "limit": None,
        "subset_seed": 0,
        "hub": {"path": str(repo), "name": None, "split": "test", "revision": "main"},
    }
    with pytest.raises(hub_lock.UnlockedRevision):
        data.prepare(cfg, None)
    hub_lock.resolve("dataset", str(repo), "main", write=True, lookup=lookup(SHA_A))
    problems, _ = data.prepare(cfg, None)
    bundled, _ = data.prepare({**cfg, "source": "bundled", "bundled_path": f"{name}.jsonl"}, None)
    assert len(problems) == len(bundled) == 20
    assert [(p.question, p.gold, p.choices) for p in problems] == [
        (p.question, p.gold, p.choices) for p in bundled
    ]
    assert problems[0].metadata["source"] == f"hub:{repo}@{SHA_A}[test]"
