"""A clone alone runs the default experiment: no benchmark mirror, no folder beside it.

The repository copy lives in a temporary directory (no ../shared/data beside it) and
RETRACE_MIRROR is unset, as on a researcher's laptop; or it points at a directory that does
not exist, which must not matter to bundled data either.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.workflow.conftest import SNAKEMAKE, copy_repo, env_for


def env_without_mirror(root, variable: bool) -> dict:
    env = {k: v for k, v in env_for(root).items() if k != "RETRACE_MIRROR"}
    return {**env, "RETRACE_MIRROR": str(root / "no-such-mirror")} if variable else env


def run_without_mirror(root, *args, variable=False):
    env = env_without_mirror(root, variable)
    return subprocess.run(
        [SNAKEMAKE, "--cores", "2", *args], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    root = copy_repo(tmp_path_factory.mktemp("clone") / "retrace")
    assert not (root.parent / "shared").exists()
    return root


@pytest.mark.parametrize("variable", [False, True], ids=["unset", "nonexistent"])
def test_default_plan_and_its_data_stage_need_no_mirror(clone, variable):
    plan = run_without_mirror(clone, "-n", variable=variable)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    data = sorted(set(re.findall(r"output: (results/data/[^,\s]+\.jsonl)", plan.stdout)))
    assert "results/data/smoke_bigbench_word_unscrambling.jsonl" in data  # the ART smoke's data too
    done = run_without_mirror(clone, *data, "--forcerun", "data", variable=variable)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert all((clone / d).stat().st_size > 0 for d in data)


@pytest.mark.parametrize(
    "variable, why",
    [
        (False, "reads the benchmark mirror, and none was found"),
        (True, "mirror directory .*no-such-mirror does not exist"),
    ],
    ids=["unset", "nonexistent"],
)
def test_a_mirror_experiment_without_a_mirror_fails_naming_the_dataset(clone, variable, why):
    proc = run_without_mirror(clone, "-n", "--config", "experiment=art_paper", variable=variable)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(rf"MirrorMissing: dataset '\w+':? {why}", out)


def retrace_run(root, *args):
    env = env_without_mirror(root, variable=False)
    return subprocess.run(
        [sys.executable, "-m", "retrace", "run", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_retrace_run_dry_run_prints_the_snakemake_command(clone):
    proc = retrace_run(clone, "--experiment", "plumbing", "--limit", "2", "-n")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (
        "running: snakemake --cores 2 -n --config experiment=plumbing 'overrides=[\"dataset.limit=2\"]'"
        in proc.stdout
    )
    assert "results/data/smoke_math.jsonl" in proc.stdout


def test_retrace_run_bad_value_ends_in_one_line_naming_the_key(clone):
    proc = retrace_run(clone, "-n", "--set", "estimate=maybe")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        "retrace run: failed: ConfigError: config key 'estimate' = 'maybe': takes true or false, "
        "e.g. --config estimate=false"
    )
