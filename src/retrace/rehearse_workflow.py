"""A rehearsal's workflow run: an experiment's whole Snakemake DAG on the simulated engine.

    from retrace.rehearse_workflow import derive, run_workflow, check_claims
    root = derive("paper", 0.1, effects, Path("rehearsals/paper"))   # a run dir with its own config/
    stats = run_workflow(root, cores=2)     # data -> generate -> score (and diagnose) -> claims -> report -> audit
    rows = check_claims(root, effects)      # each claims.csv row against the planted truth

`derive` copies config/ into the run directory and rewrites the copy (the checkout's config
is never touched):
- every model's `source` becomes `simulated`: a manifest without weights (retrace.models);
- each dataset the experiment reads keeps `limit: round(scale * n)` of its n questions
  (the seeded subset of the dataset config);
- every run of the experiment uses `backend: simulated` with the planted effects and short
  answers (TOKENS_MEAN); its `backend.*` overrides are dropped (the real engine's settings);
- a hub reward model scorer (`hf_reward`, RM@N) becomes the policy judge, which the
  simulated engine answers with a coin: RM@N and beam search get an uninformative verifier;
- the raw-rate probe is off, and the request cache lives in the run directory.
The run directory links the checkout's Snakefile, workflow/ and profiles/ beside its
config/; Snakemake runs there with RETRACE_CONFIG_DIR pointing at the derived config. What is real: every stage's code (data
from the mirror, methods, votes, scoring, diagnostics, claims, report, audit). What is
simulated: the engine's answers and the verifier; no model is loaded.

Not covered: DRR's and ART's own stages (their discriminator and tools); `derive` refuses an
experiment with a `drr:` or `art:` block rather than rehearse it partly.
"""

from __future__ import annotations

import csv
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from retrace.config import CONFIG_DIR
from retrace.yamlfile import load_yaml

REPO = CONFIG_DIR.parent
# Answers short enough that hardly any budget cuts them (lognormal around 40 tokens: 0.5 % reach
# the paper's smallest budget, 128): a cut answer has no answer, which would move a method's
# accuracy away from what is planted; the rehearsal checks the claims against planted truth.
TOKENS_MEAN = 40


def _dump(path: Path, data: dict, header: str) -> None:
    import yaml

    path.write_text(f"# {header}\n" + yaml.safe_dump(data, sort_keys=False, width=110))


def _simulated_run(run: dict, effects: Path) -> dict:
    """A run of the experiment on the simulated engine (its engine overrides dropped)."""
    keep = [o for o in run.get("overrides", ()) if not o.lstrip("+~").startswith("backend.")]
    methods = []
    for m in run["methods"]:
        if isinstance(m, dict):
            over = [o for o in m.get("overrides", ()) if not o.lstrip("+~").startswith("backend.")]
            m = {**m, "overrides": over}
        methods.append(m)
    return {
        **run,
        "backend": "simulated",
        "overrides": keep
        + [f"backend.engine.effects={effects}", f"backend.engine.tokens_mean={TOKENS_MEAN}"],
        "methods": methods,
    }


def _reward_models_to_judge(config_dir: Path) -> list[str]:
    """Method configs whose scorer is a hub reward model, rewritten to the policy judge."""
    changed = []
    for path in sorted((config_dir / "method").glob("*.yaml")):
        cfg = load_yaml(path)
        if (cfg.get("scorer") or {}).get("name") == "hf_reward":
            cfg["scorer"] = {"name": "llm_judge", "model": None, "params": cfg["scorer"].get("params")}
            _dump(
                path, cfg, f"rehearsal copy of {path.name}: hub reward model -> simulated verifier (a coin)"
            )
            changed.append(path.stem)
    return changed


def _datasets(exp: dict) -> set[str]:
    return {d for run in exp["runs"] for d in run["datasets"]}


def derive(
    experiment: str,
    scale: float,
    effects: Path,
    root: Path,
    mirror: str | None = None,
    config_dir: Path = CONFIG_DIR,
) -> Path:
    """Write the rehearsal run directory `root` (see the module docstring) from the experiment
    in `config_dir` (the checkout's config/); returns it."""
    from retrace.estimate import problem_count
    from retrace.scoring.design import default_mirror

    if not 0 < scale <= 1:
        raise ValueError(f"--scale must lie in (0, 1], got {scale}")
    mirror = str(Path(mirror or default_mirror()).resolve())
    exp = load_yaml(config_dir / "experiment" / f"{experiment}.yaml")
    if exp.get("drr") or exp.get("art"):
        raise ValueError(
            f"experiment {experiment!r} has a drr:/art: block, whose stages the workflow rehearsal cannot "
            "simulate yet (docs/rehearse.md); rehearse its claims design with --design-only"
        )
    copy = root / "config"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(config_dir, copy)
    for name in ("Snakefile", "workflow", "profiles"):  # the checkout's workflow, beside the copy
        link = root / name
        if not link.is_symlink():
            link.symlink_to(REPO / name)
    effects = Path(effects).resolve()
    for path in sorted((copy / "model").glob("*.yaml")):
        cfg = load_yaml(path)
        cfg["source"] = {"kind": "simulated"}
        _dump(path, cfg, f"rehearsal copy of {path.name}: no weights (simulated engine)")
    for name in sorted(_datasets(exp)):
        path = copy / "dataset" / f"{name}.yaml"
        n = problem_count(name, (), mirror)
        if n and scale < 1:
            cfg = load_yaml(path)
            cfg["limit"] = max(1, round(scale * n))
            _dump(
                path, cfg, f"rehearsal copy of {name}.yaml: {cfg['limit']} of {n} questions (scale {scale:g})"
            )
    _reward_models_to_judge(copy)
    exp["runs"] = [_simulated_run(run, effects) for run in exp["runs"]]
    _dump(
        copy / "experiment" / f"{experiment}.yaml",
        exp,
        f"rehearsal of {experiment} on the simulated engine (retrace rehearse --workflow), scale {scale:g}",
    )
    glob = {
        "experiment": experiment,
        "mirror": mirror,
        "overrides": [],
        "estimate": False,
        "probe": False,
        "request_cache": str((root / "cache").resolve()),
    }
    _dump(copy / "config.yaml", glob, "rehearsal run: simulated engine, no model (retrace rehearse)")
    return root


def run_workflow(root: Path, cores: int = 2, log=None) -> dict:
    """Run Snakemake on the rehearsal in `root`: {jobs, wall_s, cpu_s, returncode, log}."""
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    env = {**os.environ, "RETRACE_CONFIG_DIR": str((root / "config").resolve())}
    src = str(Path(__file__).resolve().parents[1])  # the stages run this checkout's retrace
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    log_path = root / "snakemake.log"
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    # the simulated engine loads nothing: every core may run an engine job at once
    with open(log_path, "w") as out:
        proc = subprocess.run(
            [snakemake, "--cores", str(cores), "--resources", f"engine={cores}"],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = log_path.read_text(errors="replace")
    done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", text)
    return {
        "jobs": int(done[-1][0]) if done else 0,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": cpu,
        "returncode": proc.returncode,
        "log": log_path,
    }


def cached_requests(root: Path) -> int:
    """Finished requests in the rehearsal's request cache (its index's keys, retrace.cache)."""
    from retrace.cache import RequestCache

    cache = root / "cache"
    return RequestCache(cache).count() if cache.is_dir() else 0


def row_truth(row: dict, effects: list[dict]) -> float:
    """The planted difference (a fraction) a claims.csv row measures: method minus baseline,
    and for "weaker models gain most" the weak model's gain minus the strong model's."""
    from retrace.backends.simulated import planted_points

    def gap(model: str) -> float:
        return planted_points(effects, model, row["dataset"], row["method"]) - planted_points(
            effects, model, row["dataset"], row["baseline"]
        )

    if " vs " in row["model"]:
        weak, strong = row["model"].split(" vs ", 1)
        return (gap(weak) - gap(strong)) / 100
    return gap(row["model"]) / 100


def check_claims(root: Path, effects_path: Path) -> list[tuple[dict, float]]:
    """(claims.csv row, planted truth) for every row of the rehearsal's claims."""
    from retrace.backends.simulated import load_effects

    effects = load_effects(effects_path)
    with open(root / "results" / "report" / "claims.csv", newline="") as f:
        return [(row, row_truth(row, effects)) for row in csv.DictReader(f)]
