"""Where the config groups live (config/, or $RETRACE_CONFIG_DIR), a group's options, and the
error that names a bad key or option. Below retrace.config.compose and retrace.config.experiment, which both
use them (retrace.config.compose re-exports each name).

    group_options("dataset")   # ["asdiv", "gsm8k", ...]: the stems of config/dataset/*.yaml
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_DIR = Path(os.environ.get("RETRACE_CONFIG_DIR", Path(__file__).resolve().parents[3] / "config"))


class ConfigError(ValueError):
    """A config key, group option or override that does not exist; the message lists valid ones."""


def group_options(group: str, config_dir: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in (config_dir / group).glob("*.yaml"))
