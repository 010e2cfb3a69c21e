"""Each bad input a user is likely to give ends in one line naming the file, the key and what
is valid there (the table of the README's "Errors as messages"): experiment files, overrides,
--config values, data files and an unwritable results folder."""

from __future__ import annotations

import os

import pytest
import yaml

from retrace import cli
from retrace.config.compose import ConfigError, check_global, compose, load_experiment

RUN = {"models": ["smollm2-135m-q41"], "backend": "llamacpp", "datasets": ["smoke_mc"], "methods": ["greedy"]}


@pytest.fixture
def config_dir(tmp_path):
    """A config folder whose experiment/ the test writes; the other groups are the real ones."""
    from retrace.config.compose import CONFIG_DIR

    root = tmp_path / "config"
    root.mkdir()
    for group in ("model", "dataset", "method", "backend"):
        (root / group).symlink_to(CONFIG_DIR / group)
    (root / "experiment").mkdir()
    return root


def experiment_error(config_dir, text: str) -> str:
    (config_dir / "experiment" / "bad.yaml").write_text(text)
    with pytest.raises((ConfigError, ValueError)) as err:
        load_experiment("bad", config_dir)
    message = str(err.value)
    assert "\n" not in message and "config/experiment/bad.yaml" in message
    return message


def test_yaml_syntax_error_names_the_file_and_line(config_dir):
    message = experiment_error(config_dir, "runs:\n  - models: [a\n    backend: x\n")
    assert "bad.yaml, line 3, column" in message and "YAML syntax error" in message


def test_dataset_for_datasets_names_the_key_and_the_valid_ones(config_dir):
    run = {k: v for k, v in RUN.items() if k != "datasets"} | {"dataset": ["smoke_mc"]}
    message = experiment_error(config_dir, yaml.safe_dump({"runs": [run]}))
    assert "runs[0]: unknown key 'dataset'; valid: backend, datasets, methods, models" in message


def test_an_unknown_run_key_is_refused_not_ignored(config_dir):
    message = experiment_error(config_dir, yaml.safe_dump({"runs": [RUN | {"shard": 2}]}))
    assert "runs[0]: unknown key 'shard'; valid:" in message and "shards" in message


def test_an_unknown_dataset_lists_the_datasets(config_dir):
    message = experiment_error(config_dir, yaml.safe_dump({"runs": [RUN | {"datasets": ["gsm8kk"]}]}))
    assert "runs[0].datasets[0]: unknown dataset 'gsm8kk'; valid: aime24" in message and "gsm8k," in message


def test_a_bad_choice_lists_the_choices(config_dir):
    method = {
        "label": "m",
        "method": "majority",
        "equal_compute": {"refine": "r", "majority": "m", "kind": "eff"},
    }
    message = experiment_error(config_dir, yaml.safe_dump({"runs": [RUN | {"methods": [method]}]}))
    assert "runs[0].methods[0].equal_compute.kind: 'eff'; valid: effective, nominal" in message


def test_every_experiment_in_the_repository_is_valid():
    from retrace.config.compose import group_options

    for name in group_options("experiment"):
        assert load_experiment(name)["runs"]


def test_a_config_value_of_the_wrong_kind_names_the_key():
    with pytest.raises(ConfigError, match="config key 'estimate' = 'maybe': takes true or false"):
        check_global({"experiment": "smoke", "estimate": "maybe"})
    assert check_global({"experiment": "smoke", "probe": "false"})["probe"] is False


def test_an_override_unknown_to_the_method_names_the_method():
    with pytest.raises(ConfigError, match=r"'method.n'.*\(method 'greedy', config/method/greedy.yaml\)"):
        compose({"method": "greedy"}, ["method.n=abc"])


def test_a_malformed_data_file_is_one_line_naming_file_and_line(tmp_path, capsys):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(
        '{"question": "1+1?", "answer": "#### 2"}\n{"question": \n'
    )
    out = tmp_path / "out" / "gsm8k.jsonl"
    assert cli.main(["data", "--dataset", "gsm8k", "--mirror", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("retrace data: ValueError: ") and "gsm8k/test.jsonl:2:" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="[NOT_ROOT] root writes into read-only folders")
def test_a_read_only_results_folder_is_one_line(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o555)
    try:
        code = cli.main(["data", "--dataset", "smoke_mc", "--out", str(results / "data" / "smoke_mc.jsonl")])
    finally:
        results.chmod(0o755)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("retrace data: Permission denied: ") and "read-only?" in err


def test_an_unwritable_folder_as_root_sees_it_is_one_line_too(tmp_path, monkeypatch, capsys):
    """The same message where the test runs as root (who may write anywhere): the folder
    refuses the temporary file as a read-only folder would."""
    import tempfile

    def refuse(*args, dir=None, **kwargs):
        raise PermissionError(13, "Permission denied", str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out = tmp_path / "results" / "data" / "smoke_mc.jsonl"
    assert cli.main(["data", "--dataset", "smoke_mc", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"retrace data: Permission denied: {out} was not written") and "read-only?" in err
    assert "\n" not in err
