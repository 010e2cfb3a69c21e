"""The user-facing command line: grouped help with examples, `list`, `run`'s Snakemake
command, `audit --quiet`, and one-line errors."""

from __future__ import annotations

import json

import pytest

from retrace import cli
from retrace.app import catalog, launch
from tests.unit.test_provenance import chain, flip_byte  # noqa: F401 (a fixture)

USER = ("run", "list", "plan", "status", "audit", "export", "rehearse")


def help_text(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return capsys.readouterr().out


def test_top_level_help_lists_user_commands_apart_from_internal_steps(capsys):
    text = help_text(capsys)
    commands, steps = text.split("internal steps")
    assert all(f"\n  {name} " in commands for name in USER)
    assert "generate" in steps and "generate" not in commands


@pytest.mark.parametrize("name", USER)
def test_every_user_command_help_ends_with_examples(capsys, name):
    text = help_text(capsys, name)
    examples = text.split("examples:\n", 1)[1]
    assert f"retrace {name}" in examples


def test_a_command_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="'list' is registered twice"):
        cli.command("list", "again", ())(lambda p: None)


def test_list_marks_where_each_dataset_comes_from(capsys):
    assert cli.main(["list", "datasets"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "[bundled]" in lines["smoke_bigbench_arithmetic"] and "[mirror]" in lines["gsm8k"]


def test_list_shows_every_config_file_once_in_one_line_each():
    for kind, group in catalog.GROUPS.items():
        names = [n for n, _ in catalog.entries(kind)]
        files = sorted(p.stem for p in (catalog.CONFIG_DIR / group).glob("*.yaml"))
        assert names[: len(files)] == files
        assert all("\n" not in line and len(line) <= catalog.WIDTH for _, line in catalog.entries(kind))


def test_run_turns_limit_and_set_into_snakemake_config():
    items = launch.config_args("refine_smoke", 20, ["probe=false", "method.n=8"])
    assert items[:2] == ["experiment=refine_smoke", "probe=false"]
    assert json.loads(items[2].removeprefix("overrides=")) == ["dataset.limit=20", "method.n=8"]
    with pytest.raises(ValueError, match="expected key=value"):
        launch.config_args(None, None, ["method.n"])


def test_run_passes_snakemake_arguments_before_config_so_a_target_stays_a_target(monkeypatch):
    seen = []
    monkeypatch.setattr(launch, "run", lambda cmd: seen.append(cmd[3:]) or 0)
    assert cli.main(["run", "-e", "smoke", "--", "results/report/index.html"]) == 0
    assert seen == [["--cores", "2", "results/report/index.html", "--config", "experiment=smoke"]]


# Excerpts of Snakemake 9's output for three failures, as `retrace run` sees them.
MIRROR_MISSING = """Building DAG of jobs...
InputFunctionException in rule data in file "/r/workflow/rules/data.smk", line 2:
Error:
  MirrorMissing: dataset 'gsm8k' reads the benchmark mirror, and none was found
Wildcards:
  dataset=gsm8k
"""
CONFIG_ERROR = """ConfigError in file "/r/workflow/rules/common.smk", line 13:
unknown key 'mirorr' in config/config.yaml or --config; valid keys: estimate, experiment
  File "/r/workflow/rules/common.smk", line 13, in <module>
"""
FAILED_JOB = """Error in rule data:
    jobid: 0
    log: results/logs/data/x.log (check log file(s) for error details)
RuleException:
CalledProcessError in file "/r/workflow/rules/data.smk", line 18:
Logfile results/logs/data/x.log:
retrace data: FileNotFoundError: /m/x.json: not found  (--debug or RETRACE_DEBUG=1 for the traceback)
WorkflowError:
At least one job did not complete successfully.
"""


@pytest.mark.parametrize(
    "output, line, log",
    [
        (
            MIRROR_MISSING,
            "MirrorMissing: dataset 'gsm8k' reads the benchmark mirror, and none was found",
            None,
        ),
        (
            CONFIG_ERROR,
            "ConfigError: unknown key 'mirorr' in config/config.yaml or --config; valid keys: "
            "estimate, experiment",
            None,
        ),
        (FAILED_JOB, "FileNotFoundError: /m/x.json: not found", "results/logs/data/x.log"),
    ],
)
def test_a_failed_run_is_summed_up_by_its_cause(output, line, log):
    assert launch.failure_line(output.splitlines(keepends=True)) == (line, log)


def test_audit_quiet_prints_only_the_failures_and_a_count(chain, capsys):
    source, a, b = chain
    assert cli.main(["audit", "--quiet", str(b)]) == 0
    assert capsys.readouterr().out == "audit: OK\n"
    flip_byte(source)
    assert cli.main(["audit", "--quiet", str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"[BAD] {source}  (source)" and "! input bytes differ" in out[1]
    assert out[-1] == "audit: FAILED (1 of 3 artifacts failed)" and len(out) == 3


def test_a_user_error_is_one_line_and_debug_shows_the_traceback(capsys):
    assert cli.main(["data", "--dataset", "no_such_set", "--out", "x.jsonl"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("retrace data: unknown dataset 'no_such_set'; valid: ") and "\n" not in err
    with pytest.raises(ValueError, match="no_such_set"):
        cli.main(["--debug", "data", "--dataset", "no_such_set", "--out", "x.jsonl"])


def test_bare_list_prints_every_kind_and_a_bad_kind_names_itself(capsys):
    # a bare `retrace list` failed on Python 3.11 ("invalid choice: []"): its example was untested
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(kind in out for kind in catalog.GROUPS)
    with pytest.raises(SystemExit):
        cli.main(["list", "experimentz"])
    assert "unknown KIND 'experimentz'" in capsys.readouterr().err
