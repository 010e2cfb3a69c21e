"""Typed, frozen settings of a job's method, dataset and backend, built and checked once from
its composed config.

    from retrace.config.settings import dataset_settings, method_settings
    s = method_settings(job.config()["method"], "config/method/refine.yaml")
    s.sampling.max_tokens      # int: a retrace.util.records.Sampling, seed 0 (set per request)
    s.scoring.n_boot           # int
    s["depth"]                 # a method's own keys, read-only, as its YAML states them
    d = dataset_settings(job.config()["dataset"], "config/dataset/math500.yaml")
    d.task, d.limit, d.subset_seed, d["hub"]

Defaults live in the YAML alone (docs/development/style.md, "Settings: one default, in the
YAML"): a typed field has no default here, so a key the YAML leaves out is refused, not filled
in. What is checked, each failure one line naming the file and the key:
- the `sampling:` block: temperature, top_p, top_k and max_tokens stated, of their types; stop,
  logprobs and ignore_eos optional (a request without them: no stop strings, no logprobs);
  any other key is refused with the valid ones listed;
- the `scoring:` block: vote, n_boot and seed, of their types, no other key;
- a dataset block: the keys every config/dataset/*.yaml states (name, task, source, split,
  questions, limit, subset_seed, mirror_path, hub), of their types, and the few a task adds
  (DATASET_OPTIONAL); any other key is refused with the valid ones listed;
- a backend's `engine:` block: the keys its backend class states (`engine_kinds`, one file per
  backend), each of its kind, and max_in_flight; a backend that states none is not checked.
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
    "str_or_null": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "source": (lambda v: v in ("mirror", "bundled", "hub"), "one of mirror, bundled, hub"),
    "mapping_or_null": (lambda v: v is None or isinstance(v, Mapping), "a mapping or null"),
    "list": (lambda v: isinstance(v, list | tuple), "a list"),
    "subjects": (
        lambda v: v == "all" or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
        "`all` or a list of strings",
    ),
}
SAMPLING_REQUIRED = {"temperature": "number", "top_p": "number", "top_k": "int", "max_tokens": "int"}
SAMPLING_OPTIONAL = {"stop": "strings", "logprobs": "int_or_null", "ignore_eos": "bool"}
SCORING_REQUIRED = {"vote": "str", "n_boot": "int", "seed": "int"}
DATASET_REQUIRED = {
    "name": "str",
    "task": "str",
    "source": "source",
    "split": "str",
    "questions": "int",
    "limit": "int_or_null",
    "subset_seed": "int",
    "mirror_path": "str_or_null",
    "hub": "mapping_or_null",
}
# Keys some tasks read (tasks/bigbench.py, bundle.py, mmlu.py, commonsense.py); `template`: the
# prompt template, where not the task's default.
DATASET_OPTIONAL = {
    "bigbench_task": "str",
    "bundled_path": "str",
    "labels_path": "str",
    "subjects": "subjects",
    "skip_lines": "list",
    "template": "str_or_null",
}


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


class MissingKey(KeyError, ConfigError):
    """A key a plugin reads that its YAML block does not state: a KeyError (so `in` and `.get`
    work as on a dict), a ValueError too (the command line prints it as one line)."""

    def __str__(self) -> str:  # KeyError repr-quotes its message; we want it readable
        return str(self.args[0])


@dataclass(frozen=True, eq=False)
class Block(Mapping[str, Any]):
    """A group's YAML block, frozen, read as a Mapping (a plugin's own keys, read plainly);
    subclasses add the typed fields every plugin of the group has."""

    block: FrozenDict
    source: str  # the file named in errors: config/<group>/<option>.yaml

    def __getitem__(self, key: str) -> Any:
        if key not in self.block:
            raise MissingKey(f"{self.source}: no key {key!r} (it states {', '.join(sorted(self.block))})")
        return self.block[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.block)

    def __len__(self) -> int:
        return len(self.block)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and self.block == other.block

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.source))


@dataclass(frozen=True, eq=False)
class MethodSettings(Block):
    """One job's method: the typed blocks every method has, and its own keys read-only."""

    name: str
    sampling: Sampling
    scoring: Scoring


@dataclass(frozen=True, eq=False)
class DatasetSettings(Block):
    """One job's dataset: what every dataset states, typed; a task's own keys read-only."""

    name: str
    task: str
    split: str
    questions: int
    limit: int | None
    subset_seed: int
    template: str | None  # None: the task's default template (no key in the YAML)


def dataset_settings(block: Mapping[str, Any], source: str) -> DatasetSettings:
    """The dataset block of a composed job config, checked and typed; `source` names its file."""
    values = checked(block, "dataset", source, DATASET_REQUIRED, DATASET_OPTIONAL)
    return DatasetSettings(
        block=freeze(values),
        source=source,
        name=values["name"],
        task=values["task"],
        split=values["split"],
        questions=values["questions"],
        limit=values["limit"],
        subset_seed=values["subset_seed"],
        template=values.get("template"),
    )


JUDGE_REQUIRED = {
    "name": "str",
    "model": "str_or_null",
    "top_logprobs": "int",
    "max_tokens": "int",
    "yes_words": "strings",
    "no_words": "strings",
    "fallback": "number",
}


@dataclass(frozen=True)
class JudgeSettings:
    """An LLM judge's `scorer:` block (retrace.engine.scorers.LLMJudge; best_of_n.yaml says each key)."""

    name: str
    model: str | None
    top_logprobs: int
    max_tokens: int
    yes_words: tuple[str, ...]
    no_words: tuple[str, ...]
    fallback: float


def judge_settings(block: Any, source: str) -> JudgeSettings:
    """A method's `scorer:` block for the LLM judge, every key stated and of its kind."""
    values = checked(block, "method.scorer", source, JUDGE_REQUIRED)
    values["yes_words"], values["no_words"] = tuple(values["yes_words"]), tuple(values["no_words"])
    return JudgeSettings(**values)


# Engine keys any backend takes beside its own (retrace.engine.scheduler: requests in flight).
ENGINE_OPTIONAL = {"max_in_flight": "int_or_null"}


@dataclass(frozen=True, eq=False)
class BackendSettings(Block):
    """One job's backend: its name and its engine block, checked against the keys and kinds its
    backend states (Backend.engine_kinds); `engine` is read-only, as the YAML states it."""

    name: str
    engine: FrozenDict


def backend_settings(
    block: Mapping[str, Any], kinds: Mapping[str, str] | None, source: str
) -> BackendSettings:
    """The backend block of a composed job config; its engine block checked against `kinds`
    (key -> kind, every key stated in the YAML) unless the backend states none (None)."""
    if not isinstance(block.get("name"), str):
        raise ConfigError(f"{source}: backend.name takes a string, got {block.get('name')!r}")
    engine = block.get("engine") or {}
    if kinds is not None:
        engine = checked(engine, "backend.engine", source, dict(kinds), ENGINE_OPTIONAL)
    frozen = freeze({**block, "engine": dict(engine)})
    return BackendSettings(block=frozen, source=source, name=block["name"], engine=frozen["engine"])


def method_settings(block: Mapping[str, Any], source: str) -> MethodSettings:
    """The method block of a composed job config, checked and typed; `source` names its file."""
    if not isinstance(block.get("name"), str):
        raise ConfigError(f"{source}: method.name takes a string, got {block.get('name')!r}")
    if "scoring" not in block:
        raise ConfigError(f"{source}: method.scoring is missing (state it in the YAML: no default in code)")
    scoring = checked(block["scoring"], "method.scoring", source, SCORING_REQUIRED)
    return MethodSettings(
        block=freeze(dict(block)),
        source=source,
        name=block["name"],
        sampling=sampling_of(block.get("sampling"), "method.sampling", source),
        scoring=Scoring(**{f.name: scoring[f.name] for f in fields(Scoring)}),
    )


@dataclass(frozen=True)
class JobSettings:
    """One job's typed settings (retrace.planning.plan.Job.settings builds them)."""

    method: MethodSettings
    dataset: DatasetSettings
    backend: BackendSettings
