"""A rehearsal's workflow run: an experiment's whole Snakemake DAG on the simulated engine.

    from retrace.app.rehearse_workflow import derive, run_workflow, check_claims
    root = derive("paper", 0.1, effects, Path("rehearsals/paper"))   # a run dir with its own config/
    stats = run_workflow(root, cores=2)     # data -> generate -> score (and diagnose) -> claims -> report -> audit
    rows = check_claims(root, effects)      # each claims.csv row against the planted truth

`derive` copies config/ into the run directory and rewrites the copy (the checkout's config
is never touched):
- every model's `source` becomes `simulated`: a manifest without weights (retrace.store.models);
- each dataset the experiment reads keeps `limit: round(scale * n)` of its n questions
  (the seeded subset of the dataset config);
- every run of the experiment uses `backend: simulated` with the planted effects and short
  answers (TOKENS_MEAN); its `backend.*` overrides are dropped (the real engine's settings);
- a hub reward model scorer (`hf_reward`, RM@N) becomes the policy judge, which the
  simulated engine answers with a coin: RM@N and beam search get an uninformative verifier;
- the raw-rate probe is off, and the request cache lives in the run directory;
- a `drr:` block runs its reasoner on the simulated engine and its discriminator on the
  simulated DM (drr/simulated_dm.py: planted accept/reject decisions; the DRR effects of the
  effects YAML, on labels drr, drr_unweighted, drr_shuffled, are planted there), the DM jobs
  on the CPU; SFT-LoRA, when enabled, is simulated too (drr/sft.py simulated_run: answers
  drawn under the label sft_lora, nothing fine-tuned). Effects on the reasoner's own labels
  (cot, abstain, selfcritic) are refused.
- an `art:` block runs on the simulated engine (art/simulated.py: it writes ART programs
  whose code generate and code execute steps really run, in the configured sandbox, and whose
  answers carry the planted effects of ART's labels: art, art_sc, art@feedback, fewshot, ...),
  with round(scale * examples) test items per task (the held-out pool and the task data stay
  whole); an ART effect limited to datasets is refused (ART's rows pool their tasks). A
  self-consistency row's truth is that of its vote (art/simulated.vote_gain).
The run directory links the checkout's Snakefile, workflow/ and profiles/ beside its
config/; Snakemake runs there with RETRACE_CONFIG_DIR pointing at the derived config. What is real: every stage's code (data
from the mirror, methods, votes, scoring, diagnostics, claims, report, audit; DRR's questions,
distillation loop, split, leak check, episode replay, metrics and summary; ART's splits,
selection, runner (pauses, tool calls, parsing), tools, baselines' prompts, AutoCoT's
clustering, votes, leak checks, summary). What is simulated: the engine's answers (ART's
programs too), the verifier and DRR's discriminator; no model is loaded.
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

from retrace.config.compose import CONFIG_DIR
from retrace.config.families import Rehearsal
from retrace.util.yamlfile import load_yaml

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


def _datasets(exp: dict) -> tuple[set[str], set[str]]:
    """(datasets the rehearsal scales down, datasets it keeps whole): the runs' datasets and the
    method families' (retrace.config.families `rehearsal_datasets`: DRR's evaluation and train sets;
    ART's task data, which its own split draws from)."""
    scaled = {d for run in exp.get("runs", ()) for d in run["datasets"]}
    whole: set[str] = set()
    for family in _families(exp):
        more, keep = family.rehearsal_datasets(exp[family.block])
        scaled, whole = scaled | more, whole | keep
    return scaled, whole


def _families(exp: dict) -> list:
    """The method families with a block in the experiment (retrace.config.families)."""
    from retrace.config.families import FAMILIES

    return [f for f in FAMILIES.all() if f.block and exp.get(f.block)]


def notes(exp: dict) -> list[str]:
    """What each method family of the experiment runs simulated, one line each."""
    return [f.rehearsal_note() for f in _families(exp)]


def _engine_copy(copy: Path, effects: Path) -> None:
    """The copy's simulated engine config carries the effects and short answers: DRR's stages
    compose the backend without a run's overrides."""
    path = copy / "backend" / "simulated.yaml"
    cfg = load_yaml(path)
    cfg["engine"] = {**cfg["engine"], "effects": str(effects), "tokens_mean": TOKENS_MEAN}
    _dump(path, cfg, "rehearsal copy of simulated.yaml: planted effects, short answers")


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
    from retrace.scoring.design import default_mirror, question_count

    if not 0 < scale <= 1:
        raise ValueError(f"--scale must lie in (0, 1], got {scale}")
    mirror = str(Path(mirror or default_mirror()).resolve())
    exp = load_yaml(config_dir / "experiment" / f"{experiment}.yaml")
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
    scaled, whole = _datasets(exp)
    for name in sorted(scaled - whole):
        path = copy / "dataset" / f"{name}.yaml"
        n = question_count(name, mirror)  # the config's count, checked against the mirror
        if scale < 1:
            cfg = load_yaml(path)
            cfg["limit"] = max(1, round(scale * n))
            _dump(
                path, cfg, f"rehearsal copy of {name}.yaml: {cfg['limit']} of {n} questions (scale {scale:g})"
            )
    _reward_models_to_judge(copy)
    _engine_copy(copy, effects)
    exp["runs"] = [_simulated_run(run, effects) for run in exp.get("runs", ())]
    for family in _families(exp):  # on the simulated engine, checked against the effects
        exp[family.block] = family.rehearsal_block(exp[family.block], Rehearsal(effects, scale, copy))
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


def _snakemake(root: Path) -> tuple[str, dict]:
    """Snakemake beside this Python, and the environment that runs `root`'s derived config
    with this checkout's retrace."""
    env = {**os.environ, "RETRACE_CONFIG_DIR": str((root / "config").resolve())}
    src = str(Path(__file__).resolve().parents[2])  # the stages run this checkout's retrace
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    return str(Path(sys.executable).with_name("snakemake")), env


def dry_run(root: Path) -> str:
    """`snakemake -n` of the rehearsal in `root`: what would run (its output)."""
    snakemake, env = _snakemake(root)
    proc = subprocess.run(
        [snakemake, "-n", "--cores", "2"], cwd=root, env=env, capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"snakemake -n failed in {root}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout + proc.stderr


def run_workflow(root: Path, cores: int = 2, log=None) -> dict:
    """Run Snakemake on the rehearsal in `root`: {jobs, wall_s, cpu_s, returncode, log}."""
    snakemake, env = _snakemake(root)
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


def bound_line(root: Path, experiment: str) -> str:
    """`bound violations: N`: each label's calls, prompt and generated tokens against its bound
    (retrace.app.bound_check), the bounds planned from the rehearsal's own config in `root`."""
    import json

    from retrace.app.bound_check import line, violations

    _, env = _snakemake(root)
    out = (root / "bounds.json").resolve()
    cmd = [
        sys.executable,
        "-m",
        "retrace",
        "plan",
        "--experiment",
        experiment,
        "--estimate",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode:
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"bound violations: not checked (retrace plan in {root}: {why})"
    return line(*violations(json.loads(out.read_text())["labels"], root / "results"))


def cached_requests(root: Path) -> int:
    """Finished requests in the rehearsal's request cache (its index's keys, retrace.store.cache)."""
    from retrace.store.cache import RequestCache

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
        rows = list(csv.DictReader(f))
    from retrace.config.families import FAMILIES

    truths = [row_truth(row, effects) for row in rows]
    for family in FAMILIES.all():  # each family's rows in its own metric (DRR's FS(k), ART's votes)
        truths = family.planted_truths(rows, truths, effects, root / "config")
    return list(zip(rows, truths))
