"""Where the benchmark mirror is (retrace.config.mirror) and the data bundled for a clone without one."""

from __future__ import annotations

import pytest

from retrace.config import mirror
from retrace.config.compose import compose
from retrace.store.data import prepare
from retrace.tasks import bundle
from tests.prerequisites import missing


@pytest.fixture
def no_beside(monkeypatch, tmp_path):
    monkeypatch.setattr(mirror, "BESIDE", tmp_path / "no-shared" / "data")
    monkeypatch.delenv(mirror.ENV, raising=False)


def test_the_config_key_wins_over_the_variable(no_beside, monkeypatch):
    monkeypatch.setenv(mirror.ENV, "/from/env")
    assert mirror.resolve("/from/config") == ("/from/config", "the `mirror:` config key")


def test_the_variable_wins_over_the_folder_beside(no_beside, monkeypatch, tmp_path):
    beside = tmp_path / "shared" / "data"
    beside.mkdir(parents=True)
    monkeypatch.setattr(mirror, "BESIDE", beside)
    monkeypatch.setenv(mirror.ENV, "/from/env")
    assert mirror.resolve(None)[0] == "/from/env"
    monkeypatch.delenv(mirror.ENV)
    assert mirror.resolve("")[0] == str(beside)


def test_no_mirror_anywhere_is_none(no_beside):
    assert mirror.resolve(None)[0] is None


@pytest.mark.parametrize("given", [None, "/nonexistent/retrace-mirror"])
def test_a_mirror_dataset_without_a_mirror_names_the_dataset_in_one_line(no_beside, given):
    cfg = compose({"dataset": "bigbench_arithmetic"})["dataset"]
    with pytest.raises(mirror.MirrorMissing) as err:
        prepare(cfg, given)
    message = str(err.value)
    assert "'bigbench_arithmetic'" in message and "\n" not in message
    assert mirror.ENV in message and "--config mirror=" in message


@pytest.mark.parametrize(
    "dataset",
    ["smoke_bigbench_arithmetic", "smoke_bigbench_hindu_knowledge", "smoke_bigbench_word_unscrambling"],
)
def test_bundled_bigbench_subsets_load_without_a_mirror(no_beside, dataset):
    problems, files = prepare(compose({"dataset": dataset})["dataset"], None)
    assert len(problems) == bundle.SUBSET_SIZE
    assert all(p.metadata["source"].startswith("bundled:bigbench/") for p in problems)
    assert [f.is_relative_to(bundle.BUNDLED) for f in files] == [True]


def test_every_bundled_file_matches_its_manifest_entry():
    assert bundle.check() == []


def test_a_changed_or_unlisted_bundled_file_is_reported(monkeypatch, tmp_path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "extra.jsonl").write_text("{}\n")
    (tmp_path / "MANIFEST.yaml").write_text("a.jsonl: {sha256: '0000'}\nb.jsonl: {sha256: '0000'}\n")
    monkeypatch.setattr(bundle, "BUNDLED", tmp_path)
    monkeypatch.setattr(bundle, "MANIFEST", tmp_path / "MANIFEST.yaml")
    found = bundle.check()
    assert any(f.startswith("a.jsonl: sha256") for f in found)
    assert "b.jsonl: listed in MANIFEST.yaml but absent" in found
    assert "extra.jsonl: not in MANIFEST.yaml" in found


def test_bundled_subsets_are_rows_of_the_mirror_files():
    """Fidelity: each bundled example is an unchanged example of the source task (mirror needed)."""
    import json
    from pathlib import Path

    root, _ = mirror.resolve(None)
    if not root or not Path(root, "bigbench").is_dir():
        missing("MIRROR", "no benchmark mirror with bigbench/ here (set RETRACE_MIRROR)")
    for task in bundle.BIGBENCH_SUBSETS:
        expected, _ = bundle.bigbench_subset(Path(root), task)
        assert json.loads((bundle.BUNDLED / "bigbench" / task / "task.json").read_text()) == expected
