"""What `retrace pilot` measures (retrace.app.pilot): for each model and backend of an
experiment, every role its jobs call, at the longest prompt and the longest output any of its
jobs gives that role.

    loads = pilot_roles.experiment_loads(global_cfg)   # {(model, backend): Engine}
    loads[("llama-3.1-8b-instruct", "vllm")].roles   # RoleLoad(role, context, max_tokens, …) each

Roles and their contexts (prompt tokens of one request, preflight's over-count: 3 characters a
token, retrace.planning.preflight), each at its cap (`max_tokens`):
- `sample`: greedy, Maj@N (and Maj@N', whose extra samples are drawn as its first N are),
  best-of-N's rollouts and refinement's depth-0 samples read the question; beam and lookahead
  read the question and every step before their deepest one;
- refinement's `continue`, `critique` and `correct` at its deepest round: the question, the
  history that round starts from (the whole conversation, or with `history: latest` the
  previous trace; retrace.planning.preflight.refine_tokens) and each earlier call of the round;
- `judge`: an LLM judge (best-of-N on the policy) reads the question and one rollout;
- `reward`: a hub reward model reads the question and one rollout (its own engine, no output);
- the method families' own (`pilot_roles` hooks): `drr`, DRR's reasoner at its last turn of an
  episode; `art`, an ART program's last segment after its demonstrations and earlier steps.
  DRR's discriminator (Flan-T5) and ART's embedder run on no LLM engine: not measured here.
A role's context is the longest over the experiment's datasets (the longest question of each,
retrace.planning.preflight.question_tokens), so a rate measured here is never one of a
shorter context than the jobs it prices. One engine per model and backend runs them all, with
the jobs' engine settings: the longest context setting any job asks for and the smallest
memory share (a label that leaves room for a co-resident reward model).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from retrace.planning.plan import job_config


@dataclass(frozen=True)
class RoleLoad:
    """One role's longest request: `context` prompt tokens, `max_tokens` generated (a reward
    model: 0, it reads `context` tokens); `scorer`: the reward model's config."""

    role: str
    context: int
    max_tokens: int
    scorer: dict | None = None


@dataclass
class Engine:
    """One engine of the pilot: a model on a backend, its composed backend config, its roles."""

    model: str
    backend: str
    backend_cfg: dict
    roles: dict[str, RoleLoad] = field(default_factory=dict)

    def add(self, load: RoleLoad) -> None:
        """Keep the longest context and output seen for the role."""
        old = self.roles.get(load.role)
        if old is None:
            self.roles[load.role] = load
        else:
            longest = max(old.context, load.context)
            self.roles[load.role] = replace(
                old, context=longest, max_tokens=max(old.max_tokens, load.max_tokens)
            )


def refine_roles(m: dict, q: int) -> list[RoleLoad]:
    """The sample and the deepest round's calls of a refinement rollout (critic: model only
    calls the model to critique; affirm and random critiques are text)."""
    from retrace.planning.preflight import refine_tokens
    from retrace.planning.sizing import round_steps

    steps, mt = round_steps(m), int(m["sampling"]["max_tokens"])
    loads = [RoleLoad("sample", q, mt)]
    if int(m["depth"]) < 1:
        return loads
    history = refine_tokens(m) - sum(
        template + out for _, template, out, _ in steps
    )  # the last round's start
    for role, template, out, call in steps:
        if call:
            loads.append(RoleLoad(role, q + history + template, out))
        history += template + out
    return loads


def best_of_n_roles(m: dict, q: int) -> list[RoleLoad]:
    """The N rollouts, then a judge call on the policy or a reward model reading each rollout
    (a judge on another model is that model's engine, not measured here)."""
    from retrace.planning.preflight import _template_tokens

    mt, scorer = int(m["sampling"]["max_tokens"]), dict(m.get("scorer") or {})
    loads = [RoleLoad("sample", q, mt)]
    if scorer["name"] != "llm_judge":  # config/method/best_of_n*.yaml name it
        return loads + [RoleLoad("reward", q + mt, 0, scorer)]
    if not scorer.get("model"):
        judge = _template_tokens(
            m["templates"]["judge"], partial=False, question="", solution="", choices=None
        )
        loads.append(RoleLoad("judge", q + mt + judge, int(scorer["max_tokens"])))
    return loads


def method_roles(m: dict, q: int) -> list[RoleLoad]:
    """The roles one problem of method config `m` calls, given its longest question `q`."""
    from retrace.planning.preflight import generated_tokens

    mt = int(m["sampling"]["max_tokens"])
    if m["name"] == "refine":
        return refine_roles(m, q)
    if m["name"] == "best_of_n":
        return best_of_n_roles(m, q)
    return [
        RoleLoad("step" if m["name"] in ("beam", "lookahead") else "sample", q + generated_tokens(m) - mt, mt)
    ]


# the engine's context and tensor parallelism: the longest and widest any job asks for
WIDEST_KEYS = ("max_model_len", "n_ctx", "tensor_parallel_size")


def merged_backend(engine: Engine, cfg: dict, first: bool) -> None:
    """The engine's backend config over its jobs: the first job's, with the longest context,
    the widest tensor parallelism and the smallest memory share any job asks for (retrace.planning.cells.shared_memory)."""
    from retrace.util.registry import BACKENDS

    if first:
        engine.backend_cfg = {**cfg["backend"], "engine": dict(cfg["backend"].get("engine") or {})}
        return
    mine, theirs = engine.backend_cfg["engine"], cfg["backend"].get("engine") or {}
    for key in WIDEST_KEYS:
        if theirs.get(key) and (not mine.get(key) or int(theirs[key]) > int(mine[key])):
            mine[key] = theirs[key]
    for key in BACKENDS.get(cfg["backend"]["name"]).memory_settings:
        if theirs.get(key) is not None and (mine.get(key) is None or theirs[key] < mine[key]):
            mine[key] = theirs[key]


def experiment_loads(global_cfg: dict, models: tuple[str, ...] = ()) -> dict[tuple[str, str], Engine]:
    """Every (model, backend) of the experiment's generation jobs (those of `models` only,
    when given) with the roles its jobs call at their longest."""
    from retrace.planning.plan import jobs, shared_overrides
    from retrace.planning.preflight import question_tokens

    dso = shared_overrides(global_cfg, "dataset")
    out: dict[tuple[str, str], Engine] = {}
    for job in jobs(global_cfg):
        if models and job.model not in models:
            continue
        cfg = job_config(job)
        key = (job.model, job.backend)
        first = key not in out
        engine = out.setdefault(key, Engine(job.model, job.backend, {}))
        merged_backend(engine, cfg, first)
        q = question_tokens(job.dataset, global_cfg.get("mirror"), tuple(dso))
        for load in method_roles(cfg["method"], q):
            engine.add(load)
    family_loads(global_cfg, models, out)
    return out


def family_loads(global_cfg: dict, models: tuple[str, ...], out: dict[tuple[str, str], Engine]) -> None:
    """The method families' own roles (DRR's reasoner, ART's program segments: their
    `pilot_roles` hooks), on their blocks' engines, added to `out`."""
    from retrace.config.compose import compose, load_experiment
    from retrace.config.families import FAMILIES, Context

    ctx = Context(global_cfg, load_experiment(global_cfg["experiment"]), global_cfg.get("mirror"))
    for family in FAMILIES.active(ctx):
        for r in family.pilot_roles(ctx):
            if models and r["model"] not in models:
                continue
            cfg = compose({"model": r["model"], "backend": r["backend"]}, tuple(r["overrides"]))
            key = (r["model"], r["backend"])
            first = key not in out
            engine = out.setdefault(key, Engine(r["model"], r["backend"], {}))
            merged_backend(engine, cfg, first)
            engine.add(RoleLoad(r["role"], int(r["context"]), int(r["max_tokens"])))


def fit(load: RoleLoad, context_limit: int | None, margin: int = 16) -> RoleLoad:
    """The load clipped to the engine's context (`context_limit` tokens; None: no limit): the
    prompt over-count may exceed what the jobs' checked contexts allow."""
    if not context_limit or load.context + load.max_tokens + margin <= context_limit:
        return load
    return replace(load, context=max(1, context_limit - load.max_tokens - margin))
