"""Switches checked by effect: does setting a register entry's switch change the experiment?

    retrace deviations --experiment paper --check   # also run by `retrace plan --check`

A switch {file, key, paper[, ours]} says which config key restores the paper's choice. That
the key exists proves little: paper.yaml sets method.history in every refinement label's
overrides, so config/method/refine.yaml's `history` governs none of its jobs. So each switch is
applied to a copy of config/ and every job of the experiment is resolved (the spine's generation
jobs composed as `retrace run` composes them, each family's block as its stages read it:
Family.resolved_jobs), with and without it:
- status switchable | registered: setting `paper` must change some job's resolved config;
- status fixed (retrace already runs the paper's value): setting `paper` must change nothing,
  and setting `ours` (the value retrace ran before the fix, or the alternative it keeps) must
  change some job, which shows the key governs the jobs.
A key of config/experiment/<E>.yaml under a job group (method., backend., model., dataset.)
names that group's overrides in the experiment's runs (`method.history=latest` in a label's
overrides): every such override is rewritten, or only those of the method entries the switch's
`labels` names (an ablation that sets the key otherwise on purpose keeps its value). The new value must be of the key's kind
(a number where the file holds a number): a value that does not exist fails here, not at run time.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

JOB_GROUPS = ("method.", "backend.", "model.", "dataset.")


def resolved_jobs(experiment: str, config_dir: Path) -> dict[str, Any]:
    """Job name -> resolved config of every job of `experiment` read from `config_dir`."""
    from retrace.config.compose import compose, load_experiment
    from retrace.config.families import FAMILIES, Context
    from retrace.planning.plan import jobs

    exp = load_experiment(experiment, config_dir)
    out: dict[str, Any] = {}
    seen = set()
    for job in jobs({"experiment": experiment}, config_dir) if exp.get("runs") else []:
        key = (job.model, job.backend, job.dataset, job.method, job.overrides)
        if key not in seen:  # seeds share one composed config
            seen.add(key)
            out[job.path] = compose(job.selections(), job.overrides, config_dir)
    ctx = Context({"experiment": experiment}, exp)
    for family in FAMILIES.active(ctx):
        if family.block:
            for name, cfg in family.resolved_jobs(copy.deepcopy(exp[family.block]), config_dir).items():
                out[f"{family.name}:{name}"] = cfg
    return out


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    return "number" if isinstance(v, (int, float)) else type(v).__name__


def _scalar(v: Any) -> str:
    return {True: "true", False: "false", None: "null"}.get(v, str(v)) if not isinstance(v, str) else v


def _set_override(exp: dict, key: str, value: Any, labels: list | None) -> Any:
    """Rewrite every `key=…` override of the experiment's runs (only those of the method entries
    `labels` names, where it names some); the first old value (None: none)."""
    old = None
    for run in exp.get("runs") or []:
        lists = [] if labels else [run.get("overrides") or []]
        lists += [
            m.get("overrides") or []
            for m in run.get("methods") or []
            if isinstance(m, dict) and (not labels or m["label"] in labels)
        ]
        for lst in lists:
            for i, o in enumerate(lst):
                if o.split("=", 1)[0].lstrip("+~") == key:
                    old = yaml.safe_load(o.split("=", 1)[1]) if old is None else old
                    lst[i] = f"{key}={_scalar(value)}"
    return old


def _set_key(data: dict, key: str, value: Any) -> tuple[bool, Any]:
    """(found, old value) of setting dotted `key` in `data` to `value`."""
    *parents, last = key.split(".")
    for part in parents:
        if not isinstance(data, dict) or part not in data:
            return False, None
        data = data[part]
    if not isinstance(data, dict) or last not in data:
        return False, None
    old, data[last] = data[last], value
    return True, old


def set_switch(config_dir: Path, sw: dict, value: Any) -> str | None:
    """Set the switch's key to `value` in `config_dir` (a copy); why not, or None when set."""
    target = config_dir / str(sw["file"]).removeprefix("config/")
    if not target.exists():
        return f"file {sw['file']} does not exist"
    data = yaml.safe_load(target.read_text())
    key = str(sw["key"])
    found, old = _set_key(data, key, value)
    if not found and target.parent.name == "experiment" and key.startswith(JOB_GROUPS):
        old = _set_override(data, key, value, sw.get("labels"))
        found = old is not None
    if not found:
        return f"key {key!r} does not exist in {sw['file']}"
    if None not in (old, value) and _kind(old) != _kind(value):
        return f"{key}={value!r} is not a value of the key (it holds {old!r}, a {_kind(old)})"
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return None


def _with(config_dir: Path, experiment: str, sw: dict, value: Any) -> dict[str, Any] | str:
    """The resolved jobs with the switch's key at `value`, or why they cannot be resolved."""
    with tempfile.TemporaryDirectory(prefix="retrace-switch-") as tmp:
        copy_dir = Path(tmp) / "config"
        shutil.copytree(config_dir, copy_dir)
        why = set_switch(copy_dir, sw, value)
        if why:
            return why
        try:
            return resolved_jobs(experiment, copy_dir)
        except (ValueError, KeyError, TypeError) as e:
            return f"{sw['key']}={value!r} does not resolve: {str(e).splitlines()[0]}"


def _changed(base: dict, other: dict) -> list[str]:
    return sorted(k for k in base.keys() | other.keys() if base.get(k) != other.get(k))


def entry_problem(experiment: str, d: dict, config_dir: Path, base: dict[str, Any]) -> str | None:
    """Why entry `d`'s switch does not do what the entry says (None: it does)."""
    sw = d["switch"]
    shown = f"{sw['file']}: {sw['key']}"
    paper = _with(config_dir, experiment, sw, sw["paper"])
    if isinstance(paper, str):
        return paper
    changed = _changed(base, paper)
    if d["status"] != "fixed":
        return None if changed else f"{shown}={sw['paper']!r} changes no resolved job of {experiment}"
    if changed:
        return f"status fixed, but {shown}={sw['paper']!r} changes {len(changed)} jobs (first {changed[0]})"
    if "ours" not in sw:
        return "status fixed: the switch needs `ours` (the value the fix replaced) to show the key governs"
    ours = _with(config_dir, experiment, sw, sw["ours"])
    if isinstance(ours, str):
        return ours
    return None if _changed(base, ours) else f"{shown}={sw['ours']!r} changes no resolved job of {experiment}"
