"""The data rule's `source` parameter (retrace.planning.sources): what a dataset reads, by content,
never whether or where a mirror exists (issue 57).

    .venv/bin/python -m pytest -q tests/unit/test_data_sources.py
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from retrace.config.compose import CONFIG_DIR, compose
from retrace.config.mirror import MirrorMissing
from retrace.planning.sources import data_source
from retrace.store.data import prepare
from retrace.tasks.base import BUNDLED_DIR
from retrace.util.registry import TASKS
from tests import prerequisites

DATASETS = sorted(p.stem for p in (CONFIG_DIR / "dataset").glob("*.yaml"))


def dataset_cfg(name: str) -> dict:
    return compose({"dataset": name})["dataset"]


def fake_mirror(root, gsm8k_answer: int = 2, aime_answer: int = 7):
    """A mirror holding two small files, in the real mirror's layout and row format."""
    (root / "gsm8k").mkdir(parents=True)
    (root / "aime24").mkdir()
    row = {"question": "What is 1+1?", "answer": f"1+1={gsm8k_answer}\n#### {gsm8k_answer}"}
    (root / "gsm8k" / "test.jsonl").write_text(json.dumps(row) + "\n")
    (root / "aime24" / "test.jsonl").write_text(
        json.dumps({"id": 1, "problem": "3+4?", "answer": aime_answer}) + "\n"
    )
    return root


@pytest.mark.parametrize("name", [d for d in DATASETS if dataset_cfg(d).get("source") == "bundled"])
def test_a_bundled_datasets_files_are_the_ones_its_task_reads(name):
    cfg = dataset_cfg(name)
    found = TASKS.get(cfg["task"]).source_files(cfg, BUNDLED_DIR, "bundled")
    assert found == prepare(cfg, None)[1]


def test_a_mirror_datasets_files_are_the_ones_its_task_reads():
    root = prerequisites.mirror()
    for name in DATASETS:
        cfg = dataset_cfg(name)
        if cfg.get("source", "mirror") == "mirror":
            assert TASKS.get(cfg["task"]).source_files(cfg, root, "mirror") == prepare(cfg, root)[1], name


@pytest.mark.parametrize("name", [d for d in DATASETS if dataset_cfg(d).get("source") == "bundled"])
def test_a_bundled_dataset_is_the_same_with_no_mirror_a_missing_one_or_one_beside(name, tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    found = {
        data_source(name, m) for m in (None, str(tmp_path / "none"), str(empty), str(fake_mirror(empty)))
    }
    assert len(found) == 1 and found.pop().startswith("bundled:")


def test_a_mirror_dataset_reruns_when_its_own_file_changes_and_only_then(tmp_path, monkeypatch):
    mirror = fake_mirror(tmp_path / "data")
    before = {d: data_source(d, str(mirror)) for d in ("gsm8k", "aime24")}
    monkeypatch.chdir(tmp_path)
    moved = shutil.copytree(mirror, tmp_path / "elsewhere")
    # the same files by a relative path, or copied elsewhere, are the same source
    assert {d: data_source(d, "data") for d in before} == before
    assert {d: data_source(d, str(moved)) for d in before} == before
    (mirror / "MANIFEST.sha256").write_text("abc  ./other.jsonl\n")  # nothing the datasets read
    assert {d: data_source(d, str(mirror)) for d in before} == before
    fake_mirror(tmp_path / "changed", aime_answer=8)
    after = {d: data_source(d, str(tmp_path / "changed")) for d in before}
    assert after["gsm8k"] == before["gsm8k"] and after["aime24"] != before["aime24"]


def test_an_empty_mirror_fails_in_one_line_naming_the_dataset_and_the_file(tmp_path):
    (tmp_path / "data").mkdir()
    with pytest.raises(MirrorMissing) as e:
        data_source("gsm8k", str(tmp_path / "data"))
    line = str(e.value)
    assert "\n" not in line and "dataset 'gsm8k'" in line and str(tmp_path / "data/gsm8k/test.jsonl") in line


def test_an_unreadable_mirror_file_fails_in_one_line_naming_the_dataset_and_the_file(tmp_path):
    if os.geteuid() == 0:
        prerequisites.missing("NOT_ROOT", "root reads a file of mode 000")
    mirror = fake_mirror(tmp_path / "data")
    (mirror / "gsm8k" / "test.jsonl").chmod(0)
    with pytest.raises(MirrorMissing) as e:
        data_source("gsm8k", str(mirror))
    line = str(e.value)
    assert "\n" not in line and "dataset 'gsm8k'" in line and "gsm8k/test.jsonl: Permission denied" in line


def test_a_mirror_dataset_without_a_mirror_fails_naming_the_dataset():
    with pytest.raises(MirrorMissing, match="dataset 'gsm8k' reads the benchmark mirror, and none was found"):
        data_source("gsm8k", None)
