"""Typed, frozen settings of a job's method, built and checked once from its composed config.

    from retrace.config.settings import method_settings
    s = method_settings(job.config()["method"], "config/method/refine.yaml")
    s.sampling.max_tokens      # int: a retrace.util.records.Sampling, seed 0 (set per request)
    s.scoring.n_boot           # int
    s["depth"]                 # a method's own keys, read-only, as its YAML states them

Defaults live in the YAML alone (docs/development/style.md, "Settings: one default, in the
YAML"): a typed field has no default here, so a key the YAML leaves out is refused, not filled
in. What is checked, each failure one line naming the file and the key:
- the `sampling:` block: temperature, top_p, top_k and max_tokens stated, of their types; stop,
  logprobs and ignore_eos optional (a request without them: no stop strings, no logprobs);
  any other key is refused with the valid ones listed;
- the `scoring:` block: vote, n_boot and seed, of their types, no other key.
A method's own keys (n, depth, width, scorer, roles, ...) stay as its YAML has them, read-only
(`settings["n"]`): the method checks them (e.g. retrace.methods.refine.check_config).
Rerun keys are computed from the composed config, not from these objects, so typing a setting
changes no key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from retrace.config.groups import ConfigError
from retrace.util.frozen import FrozenDict, freeze
from retrace.util.records import Sampling

# What a key takes: (type check, words for the error).
_KINDS: dict[str, tuple[Any, str]] = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "strings": (
        lambda v: isinstance(v, list | tuple) and all(isinstance(x, str) for x in v),
        "a list of strings",
    ),
    "int_or_null": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
        "an integer or null",
    ),
}
SAMPLING_REQUIRED = {"temperature": "number", "top_p": "number", "top_k": "int", "max_tokens": "int"}
SAMPLING_OPTIONAL = {"stop": "strings", "logprobs": "int_or_null", "ignore_eos": "bool"}
SCORING_REQUIRED = {"vote": "str", "n_boot": "int", "seed": "int"}


def checked(block: Any, where: str, source: str, required: dict, optional: dict | None = None) -> dict:
    """`block` (a mapping) with every required key present, no unknown key and each of its kind."""
    optional = optional or {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"{source}: {where} takes a mapping, got {block!r}")
    for key in block:
        if key not in required and key not in optional:
            valid = ", ".join(sorted({**required, **optional}))
            raise ConfigError(f"{source}: unknown key {where}.{key}; valid keys: {valid}")
    for key in required:
        if key not in block:
            raise ConfigError(
                f"{source}: {where}.{key} is missing (state it in the YAML: no default in code)"
            )
    for key, value in block.items():
        test, words = _KINDS[{**required, **optional}[key]]
        if not test(value):
            raise ConfigError(f"{source}: {where}.{key} takes {words}, got {value!r}")
    return dict(block)


def sampling_of(block: Any, where: str, source: str) -> Sampling:
    """The `sampling:` block at `where` as a Sampling (seed 0: a request's seed is set per request)."""
    values = checked(block, where, source, SAMPLING_REQUIRED, SAMPLING_OPTIONAL)
    if "stop" in values:
        values["stop"] = tuple(values["stop"])
    return Sampling(**values)


@dataclass(frozen=True)
class Scoring:
    """A method's `scoring:` block: the vote rule, bootstrap resamples and their seed."""

    vote: str
    n_boot: int
    seed: int


@dataclass(frozen=True, eq=False)
class MethodSettings(Mapping[str, Any]):
    """One job's method: the typed blocks every method has, and its own keys read-only.

    A Mapping of the method's YAML block (frozen), so a method reads its own keys plainly
    (`settings["n"]`); the typed fields are what every method shares.
    """

    name: str
    sampling: Sampling
    scoring: Scoring
    block: FrozenDict
    source: str  # the file named in errors: config/method/<option>.yaml

    def __getitem__(self, key: str) -> Any:
        return self.block[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.block)

    def __len__(self) -> int:
        return len(self.block)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MethodSettings) and self.block == other.block

    def __hash__(self) -> int:
        return hash(self.name)


def method_settings(block: Mapping[str, Any], source: str) -> MethodSettings:
    """The method block of a composed job config, checked and typed; `source` names its file."""
    if not isinstance(block.get("name"), str):
        raise ConfigError(f"{source}: method.name takes a string, got {block.get('name')!r}")
    if "scoring" not in block:
        raise ConfigError(f"{source}: method.scoring is missing (state it in the YAML: no default in code)")
    scoring = checked(block["scoring"], "method.scoring", source, SCORING_REQUIRED)
    return MethodSettings(
        name=block["name"],
        sampling=sampling_of(block.get("sampling"), "method.sampling", source),
        scoring=Scoring(**{f.name: scoring[f.name] for f in fields(Scoring)}),
        block=freeze(dict(block)),
        source=source,
    )
