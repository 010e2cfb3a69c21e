"""The deviations register: every known difference between a paper and how retrace runs it.

    retrace deviations --experiment paper        # one line per deviation, each `deviation: …`
    retrace plan --check --experiment paper      # also fails on a broken register (below)

One YAML per paper experiment beside this file (paper.yaml, drr_paper.yaml, art_paper.yaml):
`experiment` (config/experiment/<name>.yaml), `paper` (its key in
config/paper_numbers.yaml) and `deviations`, each with
    id, area        a short name and what it concerns;
    paper, quote    the paper's choice and the paper's own words, with `source` (where);
    ours, why       retrace's choice and the reason;
    switch          null, or {file, key, paper}: the config key (dotted, in a file under
                    config/) whose value `paper` restores the paper's choice;
    status          fixed (retrace now does what the paper does; listed so the reader sees
                    it was checked) | switchable | registered (no switch: a stand-in, a gap
                    in the data mirror, or a question the paper leaves open);
    verdict         yes | no: whether the difference can change a claim's verdict.

    retrace deviations --experiment paper --check   # the checks below; exit 1 on any problem
    retrace deviations --experiment paper --claims  # the claims map (deviations/claims_map.py)

A switch may also carry `ours` (the value the fix replaced: required where status is fixed) and
`labels` (for a key of an experiment's method overrides: the method entries it governs).
Checks (`problems`, run by `retrace plan --check`): each switch does what its entry says, by
effect: every job of the experiment is resolved with and without it (retrace.deviations.effect;
an unknown file or key, or a value not of the key's kind, is one line); the claims map names
rows and entries that exist (retrace.deviations.claims_map); each reference of the paper in config/paper_numbers.yaml names a
model and dataset the experiment runs (pooled sets such as "all" are not dataset names).
Not covered: whether the register is complete (a reviewer's job).
"""

from __future__ import annotations

from pathlib import Path

import yaml

HERE = Path(__file__).parent
KEYS = {"id", "area", "paper", "quote", "source", "ours", "why", "switch", "status", "verdict"}
STATUSES = ("fixed", "switchable", "registered")
# Ref "datasets" that name a pooled set or a task group, not a config/dataset file.
POOLED = {"all", "unseen tasks", "library tasks", "all tasks", "mmlu tasks"}


def path_of(experiment: str) -> Path:
    return HERE / f"{experiment}.yaml"


def experiments() -> list[str]:
    """The experiments with a register."""
    return sorted(p.stem for p in HERE.glob("*.yaml"))


def load(experiment: str) -> dict:
    """The register of `experiment`, checked for shape; an error names the file and entry."""
    path = path_of(experiment)
    if not path.exists():
        raise ValueError(
            f"no deviations register for experiment {experiment!r}; registers: {', '.join(experiments())}"
        )
    data = yaml.safe_load(path.read_text())
    for i, d in enumerate(data.get("deviations") or []):
        where = f"{path}: deviations[{i}]"
        if set(d) - KEYS or not {"id", "area", "ours", "status", "verdict"} <= set(d):
            raise ValueError(f"{where}: keys {sorted(d)}; expected {sorted(KEYS)}")
        if d["status"] not in STATUSES:
            raise ValueError(f"{where}.status: {d['status']!r} not one of {', '.join(STATUSES)}")
    return data


def line(d: dict) -> str:
    """One deviation as one line."""
    sw = d.get("switch")
    switch = f"{sw['file']}: {sw['key']}={sw['paper']}" if sw else "none"
    quote = f' ("{d["quote"]}", {d.get("source", "?")})' if d.get("quote") else ""
    return (
        f"deviation: [{d['status']}] {d['id']} ({d['area']}); paper: {d.get('paper', '?')}{quote}; "
        f"ours: {d['ours']}; why: {d.get('why', '')}; switch: {switch}; "
        f"can change a verdict: {d['verdict']}"
    )


def lines(experiment: str) -> list[str]:
    return [line(d) for d in load(experiment).get("deviations") or []]


def switch_problems(experiment: str, config_dir: Path) -> list[tuple[str, str]]:
    """(file: entry, reason) for each switch that does not do what its entry says: its file or
    key does not exist, its value is not one of the key's, or setting it changes no resolved
    job of the experiment (retrace.deviations.effect)."""
    from retrace.deviations.effect import entry_problem, resolved_jobs

    out = []
    base = None
    for i, d in enumerate(load(experiment).get("deviations") or []):
        if not d.get("switch"):
            continue
        where = f"{path_of(experiment)}: deviations[{i}] ({d['id']}).switch"
        if base is None:
            base = resolved_jobs(experiment, config_dir)
        why = entry_problem(experiment, d, config_dir, base)
        if why:
            out.append((where, why))
    return out


def experiment_runs(exp: dict) -> tuple[set[str], set[str]]:
    """(models, datasets) an experiment runs: its generation runs and its DRR/ART blocks."""
    models, datasets = set(), set()
    for run in exp.get("runs") or []:
        models |= set(run["models"])
        datasets |= set(run["datasets"])
    for block in (exp.get(k) for k in ("drr", "art")):
        if block:
            models |= set(block.get("models") or [])
            for ds in block.get("datasets") or []:
                datasets.add(ds["name"] if isinstance(ds, dict) else ds)
            for group in (block.get("tasks") or {}).values():
                datasets |= set(group)
    return models, datasets


def reference_problems(paper_key: str, exp: dict, numbers: Path) -> list[tuple[str, str]]:
    """(file: claim ref key, reason) for each paper reference naming a model or dataset the
    experiment does not run."""
    models, datasets = experiment_runs(exp)
    out = []
    for i, entry in enumerate(yaml.safe_load(numbers.read_text())["claims"]):
        if entry.get("paper") != paper_key:
            continue
        refs = list(entry.get("refs") or [])
        refs += [{"dataset": ds} for ds in ((entry.get("table") or {}).get("values") or {})]
        for j, ref in enumerate(refs):
            where = f"{numbers}: claims[{i}] ({entry['claim']!r}).refs[{j}]"
            if ref.get("model") and ref["model"] not in models:
                out.append(
                    (
                        f"{where}.model",
                        f"{ref['model']} is not a model the experiment runs ({', '.join(sorted(models))})",
                    )
                )
            ds = ref.get("dataset")
            if ds and ds not in POOLED and ds not in datasets:
                out.append((f"{where}.dataset", f"{ds} is not a dataset the experiment runs"))
    return out


def problems(experiment: str, exp: dict, config_dir: Path, numbers: Path) -> list[tuple[str, str]]:
    """Everything wrong with `experiment`'s register, its claims map and its paper references
    (none without a register)."""
    from retrace.deviations import claims_map

    if not path_of(experiment).exists():
        return []
    register = load(experiment)
    ids = {d["id"] for d in register.get("deviations") or []}
    return (
        switch_problems(experiment, config_dir)
        + claims_map.problems(experiment, ids)
        + reference_problems(register["paper"], exp, numbers)
    )


def for_report(claims: list[dict]) -> list[dict]:
    """The registers to show beside "paper vs ours": a paper's, where a claim row of that paper
    is on a model its experiment runs (so the CPU experiments' reports are unchanged), each with
    its claims map (retrace.deviations.claims_map)."""
    from retrace.config.compose import load_experiment
    from retrace.deviations import claims_map

    out = []
    for experiment in experiments():
        register = load(experiment)
        try:
            models = experiment_runs(load_experiment(experiment))[0]
        except ValueError:  # a config folder without this experiment (a trimmed copy): nothing to match
            continue
        if any(c.get("paper_key") == register["paper"] and c.get("model") in models for c in claims):
            out.append(
                {
                    "experiment": experiment,
                    "paper": register["paper"],
                    "deviations": register["deviations"],
                    "claims": claims_map.load(experiment) if claims_map.path_of(experiment).exists() else [],
                }
            )
    return out


def register_problems(experiment: str, exp: dict) -> list[tuple[str, str]]:
    """`problems` for the experiment with the repository's config/ and the papers' numbers
    (`retrace plan --check` runs it after retrace.planning.preflight's checks)."""
    from retrace.config.compose import CONFIG_DIR
    from retrace.config.papers import NUMBERS

    return problems(experiment, exp, CONFIG_DIR, NUMBERS)
