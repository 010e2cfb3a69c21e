"""Resolve job configs from the Hydra groups in config/ and check the global config.

`compose(selections, overrides)` composes config/job.yaml with one option per group
(model, dataset, method, backend) plus dotted overrides, in Hydra's struct mode, and
turns Hydra's errors into ones that name the bad key and list the valid ones.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

CONFIG_DIR = Path(os.environ.get("RETRACE_CONFIG_DIR", Path(__file__).resolve().parents[2] / "config"))
GROUPS = ("model", "dataset", "method", "backend")


class ConfigError(ValueError):
    """A config key, group option or override that does not exist; the message lists valid ones."""


def group_options(group: str, config_dir: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in (config_dir / group).glob("*.yaml"))


def _check_override(base: dict, override: str) -> None:
    key = override.split("=", 1)[0].lstrip("+~")
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not of the form key=value")
    parts = key.split(".")
    node: Any = base
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(parts[:i]) or "<top level>"
            valid = ", ".join(sorted(node)) if isinstance(node, dict) else ""
            raise ConfigError(f"unknown config key {key!r} in override {override!r}; "
                              f"valid keys under {where}: {valid or '(none)'}")
        node = node[part]


@functools.lru_cache(maxsize=None)
def _compose_cached(selections: tuple, overrides: tuple, config_dir: str) -> str:
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    groups = [f"{g}={o}" for g, o in selections]
    for g, o in selections:
        if g not in GROUPS:
            raise ConfigError(f"unknown config group {g!r}; valid groups: {', '.join(GROUPS)}")
        if o not in group_options(g, Path(config_dir)):
            raise ConfigError(f"unknown {g} {o!r}; valid: {', '.join(group_options(g, Path(config_dir)))}")
    with initialize_config_dir(config_dir=config_dir, version_base="1.3", job_name="retrace"):
        base = OmegaConf.to_container(hydra_compose(config_name="job", overrides=groups), resolve=True)
        for o in overrides:
            _check_override(base, o)
        try:
            cfg = hydra_compose(config_name="job", overrides=groups + list(overrides))
        except HydraException as e:  # e.g. a value of the wrong type
            raise ConfigError(f"bad override in {list(overrides)}: {e}") from None
        return json.dumps(OmegaConf.to_container(cfg, resolve=True))


def compose(selections: dict[str, str], overrides: Iterable[str] = (),
            config_dir: Path = CONFIG_DIR) -> dict:
    """The resolved job config (a plain dict) for group `selections` and `overrides`."""
    sel = tuple(sorted(selections.items()))
    return json.loads(_compose_cached(sel, tuple(overrides), str(Path(config_dir).resolve())))


def load_schema(config_dir: Path = CONFIG_DIR) -> dict:
    return yaml.safe_load((config_dir.parent / "workflow" / "schemas" / "config.schema.yaml").read_text())


def check_global(config: dict, config_dir: Path = CONFIG_DIR) -> dict:
    """Refuse unknown top-level keys of config/config.yaml (naming the valid ones); fill defaults."""
    schema = load_schema(config_dir)
    props = schema["properties"]
    for key in config:
        if key not in props:
            raise ConfigError(f"unknown key {key!r} in config/config.yaml or --config; "
                              f"valid keys: {', '.join(sorted(props))}")
    out = {k: v.get("default") for k, v in props.items()}
    out.update(config)
    return out


def load_experiment(name: str, config_dir: Path = CONFIG_DIR) -> dict:
    path = config_dir / "experiment" / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"unknown experiment {name!r}; valid: {', '.join(group_options('experiment', config_dir))}")
    return yaml.safe_load(path.read_text())
