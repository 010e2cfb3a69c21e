"""Every config/dataset/*.yaml loads, with the expected row counts and sane golds.

Mirror datasets are read from the mirror retrace finds ($RETRACE_MIRROR, else beside the clone:
tests/prerequisites.py) and skipped ([MIRROR]) when there is none.
"""

from pathlib import Path

import pytest
import yaml

from retrace.store.data import prepare
from retrace.tasks._math import parsed
from retrace.util.registry import TASKS
from tests import prerequisites

REPO = Path(__file__).resolve().parents[2]
MIRROR = Path(prerequisites.MIRROR or REPO.parent / "no-mirror")
CONFIGS = sorted((REPO / "config" / "dataset").glob("*.yaml"))
# Full sizes per SOURCES.md; mmlu/bigbench depend on the subjects/task the config picks.
EXPECTED_ROWS = {
    "smoke_math": 20,
    "smoke_mc": 20,
    "gsm8k": 1319,
    "math500": 500,
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "olympiadbench": 675,
    "commonsenseqa": 1221,
    "winogrande": 1267,
    "openbookqa": 500,
    "openbookqa_train": 4957 - 1,  # line 3334 skipped (skip_lines)
    "piqa": 1838,
    "mmlu": 100 + 270 + 102,
    "bigbench": 369,
    "bigbench_arithmetic": 1000,
}


def test_expected_configs_exist():
    names = {p.stem for p in CONFIGS}
    assert set(EXPECTED_ROWS) <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_loads(path):
    cfg = yaml.safe_load(path.read_text())
    assert {"name", "task", "source", "split", "limit", "subset_seed", "mirror_path", "hub"} <= set(cfg)
    if cfg["source"] == "mirror" and not MIRROR.is_dir():
        prerequisites.missing("MIRROR", f"no mirror at {MIRROR} (set RETRACE_MIRROR)")
    problems, files = prepare(cfg, MIRROR)
    assert files and all(Path(f).exists() for f in files)
    if cfg["name"] in EXPECTED_ROWS and cfg.get("limit") is None:
        assert len(problems) == EXPECTED_ROWS[cfg["name"]]
    check_golds(TASKS.get(cfg["task"]), problems)


def check_golds(task, problems):
    for p in problems:
        assert p.gold.strip(), p.id
        if task.kind == "multiple_choice":
            assert p.choices and p.gold in "ABCDEFGHIJ"[: len(p.choices)], p.id
        if task.kind == "math":
            # math-verify must be able to read every gold, or nothing can ever match it.
            assert parsed(p.gold), (p.id, p.gold)
