"""A simulated discriminator (DM) for `retrace rehearse`: planted accept/reject decisions. NOT a model.

    # a DRR block (written by retrace.app.rehearse_workflow.derive into a rehearsal's own config)
    backend: simulated                                     # the reasoner: backends/simulated.py
    backbone: simulated
    backbones: {simulated: {source: simulated, effects: effects.yaml}}

    simulated_dm.skill(0.10, settings, turns=5)            # the skill that plants +10 points
    python -m retrace drr train ... / drr infer ...        # the same stages, this DM inside

`drr train` with this backbone trains nothing: it writes a checkpoint folder holding the
planted settings (method label, seed, the effects, the simulated engine's settings) and train
metrics without a loss curve, both marked `simulated`; `drr infer` then decides every turn of
the stored rejection paths as below. Everything else of DRR runs for real on the simulated
reasoner's turns (distillation, split, leak check, replay, metrics, claims, report).

How a turn is decided (from SHA-256 hashes of (method, seed, question, turn): a rerun gives the
same decisions):
- Each DM method (drr, drr_unweighted, drr_shuffled: the variant it judges with) gets its
  planted points P for (model, dataset) from the effects YAML (`{label: drr, points: 10}`;
  0 without one) and a skill s = skill(P): on a turn before the last, with probability s it
  knows whether the answer is right and accepts iff it is; otherwise it accepts on a fair coin.
  The last allowed turn (drr.max_turns_infer) is always accepted: it never abstains.
- s is the one that raises DRR's expected accuracy over its first turn (CoT) by exactly P,
  averaged over the simulated engine's question difficulties and question effects (`gain`,
  a grid integral; `skill`, bisection). P = 0 gives s = 0: the accepted turn is independent of
  its correctness, so DRR has CoT's expected accuracy, FS(k) and Acc(D) (a null with paired
  noise, as a shuffled-label DM should be).
- The DM reads correctness by comparing the turn's answer with the gold. That is the planted
  effect (it stands for what a trained DM learnt) and is allowed ONLY inside this simulation:
  a real DM whose input held the gold would be the leak drr/leak.py exists to catch.

Not covered: learning (the DM never reads its training rows, so the split runs for real but
shapes nothing, and dev metrics are not computed), abstention (with none, a planted P moves
FS(k) by (1 + k)·P and Acc(D) by P), negative effects, and effects on the reasoner's own
labels (cot, abstain, selfcritic: `check_effects` refuses them; the reasoner is null).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from retrace.drr import dm_data as dmdata
from retrace.drr import settings
from retrace.util.atomic import read_jsonl, write_json

FILE = "simulated_dm.json"  # the planted settings, in the checkpoint folder
# Labels whose accuracy comes from the reasoner alone: the rehearsal keeps them null.
# (sft_lora is not one: the simulated SFT-LoRA answers under a label of its own, drr/sft.py.)
REASONER_LABELS = ("cot", "abstain", "selfcritic", "always_accept", "always_reject")
METHOD_OF = {variant: method for method, variant in settings.DM_METHODS.items()}
GRID = 400  # points per axis of the integral over difficulty and question effect


def engine_settings(backend: str, config_dir: Path | None = None) -> dict:
    """The simulated engine's difficulty settings the DM's skill is calibrated against
    (backends/simulated.py difficulty_settings)."""
    from retrace.backends.simulated import difficulty_settings

    if backend != "simulated":
        raise ValueError(
            f"the simulated DM judges the simulated reasoner only (drr.backend: simulated), not {backend!r}"
        )
    return difficulty_settings(config_dir)


def _turn_success(engine: Mapping):
    """P(a turn is right) on a grid of (difficulty quantile, question effect), as the
    simulated engine draws it: Phi((Phi^-1(p) - rho z) / sqrt(1 - rho^2))."""
    import numpy as np
    from scipy.special import betaincinv
    from scipy.stats import norm

    base, conc, rho = engine["base_accuracy"], engine["concentration"], engine["correlation"]
    u = (np.arange(GRID) + 0.5) / GRID
    p = np.clip(betaincinv(base * conc, (1 - base) * conc, u), 1e-12, 1 - 1e-12)[:, None]
    return norm.cdf((norm.ppf(p) - rho * norm.ppf(u)[None, :]) / math.sqrt(1 - rho * rho))


def accuracy(skill: float, right, turns: int):
    """Expected accuracy of the DM's accepted turn when each turn is right with probability
    `right`: accept-if-right s + (1 - s)/2, accept-if-wrong (1 - s)/2, the last turn always."""
    yes, no = skill + (1 - skill) / 2, (1 - skill) / 2
    stay = right * (1 - yes) + (1 - right) * (1 - no)
    out = right * 0.0
    for t in range(turns - 1):
        out = out + stay**t * right * yes
    return out + stay ** (turns - 1) * right


def gain(skill: float, engine: Mapping, turns: int) -> float:
    """DRR's expected accuracy minus CoT's (its first turn) at this skill."""
    right = _turn_success(engine)
    return float(accuracy(skill, right, turns).mean() - right.mean())


def skill(points: float, engine: Mapping, turns: int) -> float:
    """The skill whose expected gain over CoT is `points` (a fraction); ValueError if no
    skill in [0, 1] plants it."""
    if points == 0:
        return 0.0
    top = gain(1.0, engine, turns)
    if not 0 < points <= top:
        raise ValueError(
            f"the simulated DM plants gains in (0, {100 * top:.1f}] points over CoT at {turns} "
            f"turns (a DM that always knows), not {100 * points:+.1f}"
        )
    low, high, right = 0.0, 1.0, _turn_success(engine)
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if accuracy(mid, right, turns).mean() - right.mean() < points else (low, mid)
    return (low + high) / 2


def decide(s: float, correct: bool, last: bool, *key) -> tuple[str, float]:
    """(decision, P(accept)) of one turn; `key` names the turn (method, seed, question, turn)."""
    from retrace.backends.simulated import unit

    if last:
        return "accept", 1.0
    knows = unit("dm-knows", *key) < s
    accept = correct if knows else unit("dm-coin", *key) < 0.5
    return ("accept" if accept else "reject"), s * float(correct) + (1 - s) / 2


def check_effects(cfg: Mapping, effects: list[dict], engine: Mapping) -> None:
    """ValueError unless the DRR block's planted effects are ones this simulation plants
    exactly: none on the reasoner's labels, DM methods within `skill`'s range."""
    from retrace.backends.simulated import planted_points

    turns = int(cfg["max_turns_infer"])
    for model in cfg["models"]:
        for e in settings.entries(cfg):
            for label in REASONER_LABELS:
                if planted_points(effects, model, e["name"], label):
                    raise ValueError(
                        f"effects plant {label!r} on {model}/{e['name']}: the DRR rehearsal's reasoner "
                        "is null (drr/simulated_dm.py); plant DRR effects on drr, drr_unweighted, drr_shuffled"
                    )
            for label in METHOD_OF.values():
                skill(planted_points(effects, model, e["name"], label) / 100, engine, turns)


def train(
    cfg: Mapping,
    variant: str,
    split_dir: Path,
    seed: int,
    out_manifest: Path,
    ckpt_dir: Path,
    out_metrics: Path,
) -> dict:
    """`drr train` for the simulated backbone: the planted settings, nothing trained."""
    from retrace.util.hashing import sha256_file

    spec = cfg["backbones"][cfg["backbone"]]
    split_dir, ckpt_dir = Path(split_dir), Path(ckpt_dir)
    train_file = split_dir / ("train_shuffled.jsonl" if variant == "shuffled" else "train.jsonl")
    dev_file = split_dir / "dev.jsonl"
    from retrace.backends.simulated import load_effects

    effects = [Path(spec["effects"])] if spec.get("effects") else []
    planted = {  # what `drr infer` decides from: the checkpoint holds it all, as a trained one would
        "simulated": True,
        "label": METHOD_OF[variant],
        "seed": seed,
        "effects_file": str(effects[0]) if effects else None,
        "effects": load_effects(effects[0]) if effects else [],
        "engine": engine_settings(cfg["backend"]),
    }
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_json(ckpt_dir / FILE, planted)
    companions = [{"path": str(ckpt_dir / FILE), "sha256": sha256_file(ckpt_dir / FILE)}]
    weights = dmdata.class_weights(variant != "unweighted", float(cfg["dm"]["accept_weight_ratio"]))
    manifest = {"variant": variant, "backbone": cfg["backbone"], "spec": dict(spec), "simulated": True}
    manifest |= {
        "weights": {str(k): v for k, v in weights.items()},
        "folder": str(ckpt_dir),
        "files": companions,
    }
    write_json(out_manifest, manifest)
    inputs = [train_file, dev_file] + effects
    settings.provenance(
        "train", cfg, inputs, companions=companions, variant=variant, seeds={"run": seed}, simulated=planted
    ).write(out_manifest)
    metrics = {
        "variant": variant,
        "simulated": "planted decisions, nothing trained (drr/simulated_dm.py)",
        "weights": manifest["weights"],
        "n_train": len(read_jsonl(train_file)),
        "n_dev": len(read_jsonl(dev_file)),
        "loss": [],
        "epochs": [],
        "degenerate": "",
        "device": "none (simulated)",
        "dev": {},
    }
    write_json(out_metrics, metrics)
    settings.provenance(
        "train", cfg, [out_manifest, train_file, dev_file], variant=variant, simulated=True
    ).write(out_metrics)
    return metrics


def judge_paths(
    cfg: Mapping, info: Mapping, problems: Mapping, rows: list, generations: Path, problems_path: Path
) -> tuple[dict, dict, dict]:
    """`episodes.judge_paths` for a simulated checkpoint: decisions, P(accept) and (no) tokens
    cut for every turn. The generations' and questions' provenance name the model and dataset
    whose planted points apply."""
    from retrace.backends.simulated import planted_points
    from retrace.store.provenance import load

    planted = json.loads((Path(info["folder"]) / FILE).read_text())
    model, dataset = load(generations)["model"]["name"], load(problems_path)["dataset"]
    turns = int(cfg["max_turns_infer"])
    points = planted_points(planted["effects"], model, dataset, planted["label"])
    s = skill(points / 100, planted["engine"], turns)
    decisions: dict[str, list[str]] = {}
    probs: dict[str, list[float]] = {}
    for row in rows:
        pid, gold = row["problem_id"], problems[row["problem_id"]].gold
        for t, turn in enumerate(row["path"]):
            key = (planted["label"], planted["seed"], pid, t)
            decision, p = decide(s, turn.get("letter") == gold, t == turns - 1, *key)
            decisions.setdefault(pid, []).append(decision)
            probs.setdefault(pid, []).append(p)
    return decisions, probs, {pid: [{} for _ in ps] for pid, ps in probs.items()}
