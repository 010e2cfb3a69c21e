"""Read-only views of shared configuration: a dict or list that refuses every change.

    cfg = freeze(job.config())        # FrozenDict of FrozenDicts and FrozenLists
    cfg["method"]["n"] = 8            # TypeError: read-only, copy it to change it
    mine = thaw(cfg)                  # plain dicts and lists again, the caller's own

retrace.planning.plan.job_config composes a job's config once per process and hands the same object
to every caller (rerun keys, resources, the estimate); freezing it turns "never change it"
from a comment into an error at the line that tries. Subclasses of dict and list, so reading
code, `isinstance` checks and JSON (the rerun keys' canonical form) see what they saw before.
`copy.deepcopy` and pickling give plain, mutable copies. Not covered: objects inside that are
neither dicts nor lists (a config holds only JSON values).
"""

from __future__ import annotations

from typing import Any, NoReturn

_WHY = "a shared config is read-only: copy it (retrace.util.frozen.thaw, copy.deepcopy) to change it"


def _refuse(self, *args, **kwargs) -> NoReturn:
    raise TypeError(_WHY)


class FrozenDict(dict):
    def __deepcopy__(self, memo: dict) -> dict:
        return thaw(self)

    def __copy__(self) -> dict:
        return dict(self)

    def __reduce__(self):
        return (dict, (thaw(self),))


class FrozenList(list):
    def __deepcopy__(self, memo: dict) -> list:
        return thaw(self)

    def __copy__(self) -> list:
        return list(self)

    def __reduce__(self):
        return (list, (thaw(self),))


# Every method that changes a dict or a list, refused.
_CHANGES = {
    FrozenDict: ("__setitem__", "__delitem__", "clear", "pop", "popitem", "setdefault", "update", "__ior__"),
    FrozenList: ("__setitem__", "__delitem__", "append", "extend", "insert", "pop", "remove", "clear")
    + ("sort", "reverse", "__iadd__", "__imul__"),
}
for _cls, _names in _CHANGES.items():
    for _name in _names:
        setattr(_cls, _name, _refuse)


def freeze(value: Any) -> Any:
    """`value` with every dict and list in it read-only (new objects; `value` is not changed)."""
    if isinstance(value, dict):
        out = FrozenDict()
        for k, v in value.items():
            dict.__setitem__(out, k, freeze(v))
        return out
    if isinstance(value, list):
        out_list = FrozenList()
        for v in value:
            list.append(out_list, freeze(v))
        return out_list
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a (frozen) config."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
