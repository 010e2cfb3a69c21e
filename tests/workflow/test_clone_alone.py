"""A clone alone runs the default experiment: no benchmark mirror, no folder beside it.

The repository copy lives in a temporary directory (no ../shared/data beside it) and
RETRACE_MIRROR is unset, as on a researcher's laptop; or it points at a directory that does
not exist, which must not matter to bundled data either.
"""

from __future__ import annotations

import re
import shutil
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
    # --forcerun: the data the other parametrization made are finished, whatever the mirror
    plan = run_without_mirror(clone, "-n", "--forcerun", "data", variable=variable)
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


def data_targets(root, env) -> list[str]:
    plan = subprocess.run(
        [SNAKEMAKE, "--cores", "2", "-n"], cwd=root, env=env, capture_output=True, text=True
    )
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    return sorted(set(re.findall(r"output: (results/data/[^,\s]+\.jsonl)", plan.stdout)))


def test_a_mirror_placed_beside_finished_bundled_data_reruns_none_of_it(tmp_path):
    """The default run's data are bundled: a mirror that appears beside the clone afterwards (as
    docs/guides/data.md suggests, for a larger experiment) makes none of its data jobs stale."""
    root = copy_repo(tmp_path / "retrace")
    env = env_without_mirror(root, variable=False)
    data = data_targets(root, env)
    done = subprocess.run(
        [SNAKEMAKE, "--cores", "2", *data], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (tmp_path / "shared" / "data").mkdir(parents=True)  # ../shared/data: found by retrace.config.mirror
    (tmp_path / "shared" / "data" / "MANIFEST.sha256").write_text("0  ./gsm8k/test.jsonl\n")
    again = subprocess.run(
        [SNAKEMAKE, "--cores", "2", "-n", *data], cwd=root, env=env, capture_output=True, text=True
    )
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]


MIRROR_FED = """\
runs:
  - models: [smollm2-135m-q40]
    backend: llamacpp
    datasets: [gsm8k, aime24]
    methods: [greedy]
    seeds: [0]
"""


def test_a_changed_mirror_file_reruns_only_the_data_of_the_dataset_reading_it(tmp_path):
    from tests.unit.test_data_sources import fake_mirror

    root = copy_repo(tmp_path / "retrace")
    (root / "config/experiment/mirror_fed.yaml").write_text(MIRROR_FED)
    mirror = fake_mirror(tmp_path / "bench")
    env = env_without_mirror(root, variable=False)
    args = ["--config", "experiment=mirror_fed", f"mirror={mirror}", "probe=false"]
    targets = ["results/data/gsm8k.jsonl", "results/data/aime24.jsonl"]

    def snakemake(*extra):
        proc = subprocess.run(
            [SNAKEMAKE, "--cores", "2", *extra, *targets, *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    snakemake()
    moved = shutil.move(mirror, tmp_path / "moved")  # the same files elsewhere: nothing stale
    args[2] = f"mirror={moved}"
    assert "Nothing to be done" in snakemake("-n")
    fake_mirror(tmp_path / "changed", aime_answer=8)  # aime24's file changed, gsm8k's not
    args[2] = f"mirror={tmp_path / 'changed'}"
    plan = snakemake("-n")
    assert set(re.findall(r"output: (results/data/[^,\s]+\.jsonl)", plan)) == {"results/data/aime24.jsonl"}
    assert "Params have changed since last execution" in plan  # its source digest, nothing else
