"""Resolve job configs from the Hydra groups in config/ and check the global config.

`compose(selections, overrides)` composes config/job.yaml with one option per group
(model, dataset, method, backend) plus dotted overrides (parsed with Hydra's override
grammar), refusing unknown keys with the valid ones listed, as Hydra's struct mode does.

Why not `hydra.compose` per job: it costs ~0.1-0.3 s a call, and planning the paper grid
composes hundreds of jobs; the group files here are plain mappings (no nested defaults or
interpolation), for which composition is a merge. `compose_with_hydra` is the reference;
a test checks that both agree on every config in the repository.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Where config/ is, ConfigError and the options of a group live one level down, where
# retrace.config.experiment (which this module's load_experiment uses) imports them too.
from retrace.config.groups import CONFIG_DIR as CONFIG_DIR
from retrace.config.groups import ConfigError as ConfigError
from retrace.config.groups import group_options as group_options
from retrace.util.yamlfile import load_yaml

GROUPS = ("model", "dataset", "method", "backend")


def _check_override(base: dict, override: str, chosen: dict[str, str] | None = None) -> None:
    key = override.split("=", 1)[0].lstrip("+~")
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not of the form key=value")
    parts = key.split(".")
    node: Any = base
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(parts[:i]) or "<top level>"
            valid = ", ".join(sorted(node)) if isinstance(node, dict) else ""
            # the group's file, so "method.n" against greedy says it is greedy that has no n
            option = (chosen or {}).get(parts[0]) if i > 0 else None
            origin = f" ({parts[0]} {option!r}, config/{parts[0]}/{option}.yaml)" if option else ""
            raise ConfigError(
                f"unknown config key {key!r} in override {override!r}; "
                f"valid keys under {where}{origin}: {valid or '(none)'}"
            )
        node = node[part]


def _group_file(config_dir: str, group: str, option: str) -> dict:
    return load_yaml(Path(config_dir) / group / f"{option}.yaml") or {}


def _default_options(config_dir: str) -> dict[str, str]:
    defaults = load_yaml(Path(config_dir) / "job.yaml")["defaults"]
    return {g: o for d in defaults if isinstance(d, dict) for g, o in d.items()}


def _check_selections(selections: tuple, config_dir: str) -> None:
    for g, o in selections:
        if g not in GROUPS:
            raise ConfigError(f"unknown config group {g!r}; valid groups: {', '.join(GROUPS)}")
        if o not in group_options(g, Path(config_dir)):
            raise ConfigError(f"unknown {g} {o!r}; valid: {', '.join(group_options(g, Path(config_dir)))}")


def _apply_override(cfg: dict, override: str) -> None:
    key, parsed_value = _parsed_override(override)
    *path, last = key.split(".")
    node = cfg
    for part in path:
        node = node[part]
    value = copy.deepcopy(parsed_value)  # the parse is shared: a later override may change this one's value
    if not _same_kind(node.get(last), value):
        raise ConfigError(
            f"override {override!r}: {key} takes {_kind(node[last])} "
            f"(default {node[last]!r}), got {_kind(value)} {value!r}"
        )
    node[last] = value


@functools.cache
def _parsed_override(override: str) -> tuple[str, Any]:
    """(key, value) of one override, parsed by Hydra's grammar once per process: building the
    parser was most of composing a paper-scale grid's configs (the same few overrides recur)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_override(override)
    except HydraException as e:
        raise ConfigError(f"bad override {override!r}: {e}") from None
    return parsed.key_or_group, parsed.value()


def _kind(v: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(v), type(v).__name__)


def _same_kind(old: Any, new: Any) -> bool:
    """Whether an override may replace `old` by `new`: the same kind of value (an integer
    where a number is expected is fine; null on either side is, since null means 'unset')."""
    if old is None or new is None:
        return True
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool)
    if isinstance(old, float) and isinstance(new, int):
        return True
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
        return True
    return type(old) is type(new)


# Values outside these bounds are refused whether they come from a group file or an override
# (inclusive bounds; None = unbounded). Keys absent from a config are not checked.
RANGES = {
    "method.n": (1, None),
    "method.depth": (0, None),
    "method.width": (1, None),
    "method.sampling.temperature": (0, None),
    "method.sampling.top_p": (0, 1),
    "method.sampling.max_tokens": (1, None),
    "dataset.limit": (0, None),
}


def check_ranges(cfg: dict, overrides: Iterable[str] = ()) -> None:
    for key, (low, high) in RANGES.items():
        node: Any = cfg
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None or isinstance(node, bool) or not isinstance(node, (int, float)):
            continue
        if (low is not None and node < low) or (high is not None and node > high):
            bound = f">= {low}" if high is None else f"in [{low}, {high}]"
            given = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") == key]
            raise ConfigError(
                f"{key} = {node!r} is out of range: must be {bound}"
                + (f" (override {given[-1]!r})" if given else "")
            )


@functools.cache
def _compose_cached(selections: tuple, overrides: tuple, config_dir: str) -> str:
    _check_selections(selections, config_dir)
    chosen = {**_default_options(config_dir), **dict(selections)}
    cfg = {g: _group_file(config_dir, g, o) for g, o in chosen.items()}
    for o in overrides:
        _check_override(cfg, o, chosen)
        _apply_override(cfg, o)
    check_ranges(cfg, overrides)
    return json.dumps(cfg)


def compose_with_hydra(
    selections: dict[str, str], overrides: Iterable[str] = (), config_dir: Path = CONFIG_DIR
) -> dict:
    """The same composition through `hydra.compose` (slow; the reference for tests)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    groups = [f"{g}={o}" for g, o in selections.items()]
    with initialize_config_dir(
        config_dir=str(Path(config_dir).resolve()), version_base="1.3", job_name="retrace"
    ):
        try:
            cfg = hydra_compose(config_name="job", overrides=groups + list(overrides))
        except HydraException as e:
            raise ConfigError(f"bad override in {list(overrides)}: {e}") from None
        return OmegaConf.to_container(cfg, resolve=True)


def compose(selections: dict[str, str], overrides: Iterable[str] = (), config_dir: Path = CONFIG_DIR) -> dict:
    """The resolved job config (a plain dict) for group `selections` and `overrides`."""
    sel = tuple(sorted(selections.items()))
    return json.loads(_compose_cached(sel, tuple(overrides), _resolved(str(config_dir))))


@functools.cache
def _resolved(config_dir: str) -> str:
    # Planning composes every job's config several times (tens of thousands at paper scale):
    # resolving the folder each time was a tenth of that.
    return str(Path(config_dir).resolve())


def load_schema(config_dir: Path = CONFIG_DIR) -> dict:
    return load_yaml(config_dir.parent / "workflow" / "schemas" / "config.schema.yaml")


def check_global(config: dict, config_dir: Path = CONFIG_DIR) -> dict:
    """Refuse unknown top-level keys of config/config.yaml (naming the valid ones); fill defaults."""
    schema = load_schema(config_dir)
    props = schema["properties"]
    for key in config:
        if key not in props:
            raise ConfigError(
                f"unknown key {key!r} in config/config.yaml or --config; "
                f"valid keys: {', '.join(sorted(props))}"
            )
    out = {k: v.get("default") for k, v in props.items()}
    out.update({key: _typed(key, value, props[key]) for key, value in config.items()})
    return out


_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _typed(key: str, value: Any, spec: dict) -> Any:
    """`value` as the schema's type for `key`: `--config probe=false` arrives as the string
    "false" and `--config mirror=123` as a number; what cannot be converted is refused naming
    the key and what it takes (jsonschema's own message names neither)."""
    types = spec.get("type")
    types = set(types) if isinstance(types, list) else {types}
    if value is None and "null" in types:
        return None
    if "boolean" in types and not isinstance(value, bool):
        if str(value).lower() not in _BOOLEANS:
            raise ConfigError(
                f"config key {key!r} = {value!r}: takes true or false, e.g. --config {key}=false"
            )
        return _BOOLEANS[str(value).lower()]
    if "string" in types and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if "array" in types and not isinstance(value, list):
        raise ConfigError(
            f"config key {key!r} = {value!r}: takes a list, e.g. --config '{key}=[\"method.n=8\"]'"
        )
    if "string" in types and not isinstance(value, str):
        raise ConfigError(f"config key {key!r} = {value!r}: takes a string ({spec.get('description', '')})")
    return value


def load_experiment(name: str, config_dir: Path = CONFIG_DIR) -> dict:
    """config/experiment/<name>.yaml, checked against its schema (retrace.config.experiment)."""
    from retrace.config.experiment import check  # deferred: it loads jsonschema

    path = config_dir / "experiment" / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(
            f"unknown experiment {name!r}; valid: {', '.join(group_options('experiment', config_dir))}"
        )
    shown = path.relative_to(config_dir.parent) if path.is_relative_to(config_dir.parent) else path
    return check(load_yaml(path), shown, config_dir)
