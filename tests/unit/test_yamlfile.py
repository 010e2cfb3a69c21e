"""retrace.util.yamlfile: YAML read once per content (the no-op rerun's planning reads the same
small files per job), yet an edited file is read again and callers get their own copy."""

from __future__ import annotations

import os

import pytest
import yaml

from retrace.util.yamlfile import _parsed, load_yaml


def test_a_file_is_parsed_once_and_each_caller_gets_its_own_copy(tmp_path):
    path = tmp_path / "tasks.yaml"
    path.write_text("arithmetic: {dataset: bigbench_arithmetic, tags: [maths]}\n")
    before = _parsed.cache_info().misses
    first = load_yaml(path)
    first["arithmetic"]["tags"].append("changed by a caller")
    second = load_yaml(tmp_path / "." / "tasks.yaml")  # the same file by another spelling
    assert second == {"arithmetic": {"dataset": "bigbench_arithmetic", "tags": ["maths"]}}
    assert _parsed.cache_info().misses == before + 1


def test_an_edited_file_is_read_again(tmp_path):
    path = tmp_path / "index.yaml"
    path.write_text("a: 1\n")
    assert load_yaml(path) == {"a": 1}
    stat = path.stat()
    path.write_text("a: 2\n")  # same size: mtime tells them apart
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_yaml(path) == {"a": 2}


def test_same_results_as_safe_load_and_errors_keep_the_line(tmp_path):
    text = "x: 1.5e-4\ny: [on, 'no', ~]\nz: {k: 2020-01-01}\n"
    (tmp_path / "ok.yaml").write_text(text)
    assert load_yaml(tmp_path / "ok.yaml") == yaml.safe_load(text)
    (tmp_path / "empty.yaml").write_text("")
    assert load_yaml(tmp_path / "empty.yaml") is None
    (tmp_path / "bad.yaml").write_text("a: 1\nb: [unclosed\n")
    with pytest.raises(yaml.YAMLError, match="line 3"):
        load_yaml(tmp_path / "bad.yaml")
