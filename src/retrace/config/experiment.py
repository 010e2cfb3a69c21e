"""Check an experiment file against workflow/schemas/experiment.schema.yaml, naming the place.

    from retrace.config.experiment import check
    check(raw, "config/experiment/smoke.yaml")   # ConfigError on the first problem, one line

Every message names the file, the key path (`runs[1].datasets[0]`) and what is valid there:
the schema's keys for an unknown key, the config group's files for an unknown model, dataset,
backend or method. The family blocks (`art:`, `drr:`, any registered family's) are checked by
their own modules.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from retrace.config.groups import CONFIG_DIR, ConfigError, group_options
from retrace.util.yamlfile import load_yaml

SCHEMA = CONFIG_DIR.parent / "workflow" / "schemas" / "experiment.schema.yaml"


def _validator():
    """The schema's validator, with a block for every registered method family (retrace.config.families):
    a family's block is its own to check, so a new family needs no line in the schema."""
    from retrace.config.families import FAMILIES

    families = tuple((f.block, f.summary) for f in FAMILIES.all() if f.block)
    return _validator_for(families)


@functools.cache
def _validator_for(families: tuple[tuple[str, str], ...]):
    from jsonschema import Draft202012Validator

    schema = load_yaml(SCHEMA)
    for block, summary in families:
        schema["properties"].setdefault(block, {"type": "object", "description": f"{summary}'s block"})
    return Draft202012Validator(schema)


def schema_default(*keys: str):
    """The default the experiment schema states for a key, e.g. ("claims", "controls"): the
    one place an experiment file's optional keys keep their defaults."""
    node = load_yaml(SCHEMA)
    for key in keys:
        node = node["properties"][key]
    return node["default"]


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _message(error) -> str:
    """One schema error as `key path: what is wrong; what is valid`."""
    where, schema, value = _where(error.absolute_path), error.schema, error.instance
    if error.validator == "additionalProperties":
        valid = sorted(schema.get("properties", {}))
        unknown = sorted(k for k in value if k not in valid and not k.startswith("_"))
        extra = " (or a `_name` holding a YAML anchor)" if "patternProperties" in schema else ""
        return f"{where}: unknown key {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}{extra}"
    if error.validator == "required":
        return f"{where}: missing key {error.message.split(' is ')[0]}; required: {', '.join(schema['required'])}"
    if error.validator == "enum":
        return f"{where}: {value!r}; valid: {', '.join(map(str, error.validator_value))}"
    if error.validator == "type":
        kinds = [_KINDS.get(t, t) for t in _as_list(error.validator_value)]
        return f"{where}: {value!r} is not {' or '.join(kinds)}"
    return f"{where}: {error.message}"


_KINDS = {
    "array": "a list",
    "object": "a mapping",
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
}


def _as_list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def _names(raw: dict) -> list[tuple[str, str, str]]:
    """(key path, group, name) of every config-group name the runs refer to."""
    out = []
    for i, run in enumerate(raw.get("runs") or []):
        out += [(f"runs[{i}].models[{j}]", "model", m) for j, m in enumerate(run.get("models") or [])]
        out += [(f"runs[{i}].datasets[{j}]", "dataset", d) for j, d in enumerate(run.get("datasets") or [])]
        out.append((f"runs[{i}].backend", "backend", run.get("backend")))
        for j, m in enumerate(run.get("methods") or []):
            name = m if isinstance(m, str) else m.get("method", m.get("label"))
            out.append((f"runs[{i}].methods[{j}]", "method", name))
    return out


SIMULATED = "simulated"  # backends/simulated.py and the simulated DM / SFT-LoRA of a rehearsal


def _values(node: Any, path: tuple = ()):
    """(key path, value) of every scalar in a parsed YAML tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _values(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _values(v, (*path, i))
    else:
        yield path, node


def simulated_problems(raw: dict) -> list[str]:
    """A simulated component (engine, DM, SFT-LoRA, anything later: any value `simulated`) is
    for a rehearsal only, i.e. an experiment whose every backend is simulated (`retrace
    rehearse` writes such a copy); beside a real backend it would pass planted answers off as
    a model's."""
    found = [(_where(p), v) for p, v in _values(raw) if not (p and str(p[0]).startswith("_"))]
    real = [(w, v) for w, v in found if w.endswith("backend") and v != SIMULATED]
    sims = [w for w, v in found if v == SIMULATED and not w.endswith("backend")]
    sims += [w for w, v in found if v == SIMULATED and w.endswith("backend")] if real else []
    if not (real and sims):
        return []
    return [
        f"{sims[0]}: 'simulated' is for a rehearsal only (`retrace rehearse`: every backend "
        f"simulated); {real[0][0]} is {real[0][1]!r}"
    ]


def problems(raw: Any, config_dir: Path = CONFIG_DIR) -> list[str]:
    """Every problem of one parsed experiment file, schema first, then unknown names."""
    if not isinstance(raw, dict):
        return [f"<top level>: an experiment is a mapping with a `runs:` list, got {type(raw).__name__}"]
    errors = sorted(_validator().iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    found = [_message(e) for e in errors]
    if found:  # names are checked once the shape is right
        return found
    for where, group, name in _names(raw):
        valid = group_options(group, config_dir)
        if name not in valid:
            found.append(f"{where}: unknown {group} {name!r}; valid: {', '.join(valid)}")
    return found + simulated_problems(raw)


def check(raw: Any, path: str | Path, config_dir: Path = CONFIG_DIR) -> dict:
    """`raw` if it is a valid experiment, else ConfigError naming the file and the first problem."""
    found = problems(raw, config_dir)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(f"{path}: {found[0]}{more}")
    return raw
