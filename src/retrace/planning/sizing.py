"""Per-job bounds of an experiment's generation jobs: tokens, GPU-seconds and attempts.

    retrace plan --experiment paper --estimate           # totals and equal-compute bound ratios
    retrace plan --experiment paper --estimate --json F  # per job the workflow runs, and per label

Each job's bound comes from its own method and roles (METHOD_BOUNDS, one function per method,
per problem, given the longest question prompt q of its dataset; `Bound` says what each count
is): greedy and Maj@N sample at `sampling.max_tokens`; refinement samples at it and each round
calls its roles at their own caps (`method.roles.<role>.max_tokens`), every call reading the
rollout's history so far; best-of-N makes N judge calls only when the policy (or another model)
judges, and a reward model reads the N rollouts instead (`reward` tokens, no generation);
search methods (beam, lookahead) and any other method: calls x max_tokens. A Maj@N' job
(`equal_compute`) is bounded by its partners: its generated tokens by the refinement's bound in
the pair's FLOP kind plus one rollout of Maj@N (its extra samples are drawn as its first N are,
so their mean length is theirs: a bound in that sense); its calls and prompt tokens by N'_max
samples a problem, the N' pricing gives when refinement spends its whole bound and every Maj@N
sample counts as the minimum sample length (retrace.methods.budget.min_sample_tokens, the same
floor the run prices N' with), so N' cannot exceed it however short the samples.

Problem counts: the dataset's (mirror or bundled) where it loads, else the dataset config's
stated `questions` (a clone without the mirror; `JobBound.stated`, and the estimate says so).

Time (`_priced`): each role's generated tokens (`role_tokens`: sample, continue, critique,
correct, judge) at that role's decode rate at its longest prompt, prompt tokens not reused
(structural prefix reuse, retrace.scoring.compute) at the longest role's prefill rate, all over
the policy's tensor-parallel GPUs only; then reward tokens at the reward model's own rate,
undivided (retrace.planning.rates: a pilot's measurement at a long enough context, the probe's
for short contexts, else assumed; `rate_detail` says which per rate); plus one engine load
(ENGINE_LOAD_S) per attempt at max_runtime. These are each label's bounds (`--json`'s
`labels`); the jobs the workflow runs, cell parts that sum their labels' and shard jobs, are
sized from them by retrace.planning.parts (`--json`'s `jobs`, the estimate, `--check`). A job's
GPU time is its wall time on all its GPUs (the reward model's included); with SAFETY it is what
the job asks SLURM for, and `attempts(limit)` how many runs of at most `limit` minutes it needs
(each attempt loads the engine again and resumes from the request cache, reward scores
included). Not covered: time waiting in the queue, and a cache shared with other jobs (a bound
assumes nothing is cached).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from retrace.planning.plan import Job, job_config

SAFETY = 1.5  # asked runtime over the bound's wall time (a shared node, stragglers)
RUNTIME_OVERHEAD_MIN = 30  # per attempt: engine load, CUDA graphs, the first batch's warm-up
ENGINE_LOAD_S = 600.0  # assumed: weights from shared disk + vLLM's CUDA graph capture


@dataclass
class Bound:
    """Token bounds of one problem (or, scaled, of a job)."""

    generated: int = 0  # tokens every call may generate (each at its cap)
    prompt: int = 0  # nominal: every call's whole prompt
    computed: int = 0  # token positions computed once with ideal prefix reuse (generated included)
    calls: int = 0  # model calls
    reward: int = 0  # tokens a reward model reads

    def scaled(self, k: int) -> Bound:
        return Bound(*(k * v for v in (self.generated, self.prompt, self.computed, self.calls, self.reward)))

    def counted(self, kind: str) -> int:
        """The tokens FLOPs are counted over (retrace.scoring.compute's two kinds)."""
        return self.computed if kind == "effective" else self.prompt + self.generated


# ---------------------------------------------------------------- per-method bounds of one problem
def greedy_bound(m: dict, q: int) -> Bound:
    mt = int(m["sampling"]["max_tokens"])
    return Bound(mt, q, q + mt, 1)


def majority_bound(m: dict, q: int) -> Bound:
    n, mt = int(m["n"]), int(m["sampling"]["max_tokens"])
    return Bound(n * mt, n * q, q + n * mt, n)  # the N samples share one prompt


def round_steps(m: dict) -> list[tuple[str, int, int, bool]]:
    """One refinement round, (role, template tokens, tokens it adds, whether it is a model call)
    each: continue, critique (a call only for critic=model; affirm and random critiques are
    text) and correct (retrace.planning.preflight's templates)."""
    from retrace.planning.preflight import _random_critique_tokens, _role, _template_tokens

    t, critic = m["templates"], m["critic"]
    steps = [("continue", _template_tokens(t["continue"]), _role(m, "continue"), True)]
    if critic != "none":
        text = {"affirm": _template_tokens(t["affirm"]), "random": _random_critique_tokens(m)}
        out, call = (_role(m, "critique"), True) if critic == "model" else (text[critic], False)
        steps.append(("critique", _template_tokens(t["critique"]), out, call))
    steps.append(
        ("correct", _template_tokens(t["correct"], has_critique=critic != "none"), _role(m, "correct"), True)
    )
    return steps


def refine_calls(m: dict, q: int) -> tuple[list[tuple[str, int, int]], int]:
    """One rollout's calls, (role, prompt tokens, generated cap) each: a sample, then D rounds
    (`round_steps`), each reading the rollout's history so far; and the final history's length."""
    steps = round_steps(m)
    history = int(m["sampling"]["max_tokens"])
    calls = [("sample", q, history)]
    for _ in range(int(m["depth"])):
        for role, template, out, call in steps:
            if call:
                calls.append((role, q + history + template, out))
            history += template + out
    return calls, history


def refine_bound(m: dict, q: int) -> Bound:
    """N rollouts of `refine_calls`; every prompt is a prefix of its rollout's final history."""
    calls, history = refine_calls(m, q)
    one = Bound(sum(g for _, _, g in calls), sum(p for _, p, _ in calls), 0, len(calls))
    n = int(m["n"])
    total = one.scaled(n)
    total.computed = q + n * history
    return total


def best_of_n_bound(m: dict, q: int) -> Bound:
    """The N rollouts, then either N judge calls or a reward model reading each rollout."""
    from retrace.planning.preflight import _template_tokens

    b = majority_bound(m, q)
    mt, n, scorer = int(m["sampling"]["max_tokens"]), int(m["n"]), m["scorer"]  # as the run reads it
    if scorer["name"] == "llm_judge":
        judge = (
            q
            + mt
            + _template_tokens(m["templates"]["judge"], partial=False, question="", solution="", choices=None)
        )
        out = int(scorer["max_tokens"])  # the judge states it (config.settings.JUDGE_REQUIRED)
        b.generated, b.prompt, b.calls = b.generated + n * out, b.prompt + n * judge, b.calls + n
        b.computed += n * (judge + out)
    else:
        b.reward = n * (q + mt)
    return b


def generic_bound(m: dict, q: int) -> Bound:
    """calls x max_tokens, each call's prompt at most the question plus the method's context."""
    from retrace.planning.preflight import generated_tokens
    from retrace.util.registry import METHODS

    calls = getattr(METHODS.get(m["name"]), "calls_per_problem", lambda c: c.get("n", 1))(m)
    context = q + generated_tokens(m)
    return Bound(calls * int(m["sampling"]["max_tokens"]), calls * context, calls * context, calls)


METHOD_BOUNDS = {
    "greedy": greedy_bound,
    "majority": majority_bound,
    "refine": refine_bound,
    "best_of_n": best_of_n_bound,
}


def problem_bound(m: dict, q: int) -> Bound:
    return METHOD_BOUNDS.get(m["name"], generic_bound)(m, q)


# ---------------------------------------------------------------- what prices each call
def role_tokens(m: dict, q: int) -> list[tuple[str, int, int]]:
    """(role, generated tokens per problem, longest prompt of its calls) of a method: each role
    is priced at its own rate at that context (retrace.planning.rates.role_rate)."""
    from retrace.planning.preflight import generated_tokens

    mt, n = int(m["sampling"]["max_tokens"]), int(m.get("n", 1))
    if m["name"] == "refine":
        calls, _ = refine_calls(m, q)
        roles: dict[str, list[int]] = {}
        for role, prompt, out in calls:
            found = roles.setdefault(role, [0, 0])
            found[0], found[1] = found[0] + out, max(found[1], prompt)
        return [(role, gen, ctx) for role, (gen, ctx) in roles.items()]
    if m["name"] == "best_of_n":
        b = best_of_n_bound(m, q)
        judged = b.calls - n
        return [("sample", n * mt, q)] + ([("judge", b.generated - n * mt, q + mt)] if judged else [])
    if m["name"] in ("greedy", "majority"):
        return [("sample", mt, q)]
    return [("sample", mt, q + generated_tokens(m))]  # search: each step reads the steps so far


# ---------------------------------------------------------------- per job
@dataclass
class JobBound:
    path: str
    rule: str
    gpus: int
    tokens: Bound
    n_prime: int | None = None  # Maj@N': N' at these bounds
    equal_compute: list = field(default_factory=list)  # [refine path, kind]
    work_s: float | None = None  # engine seconds (decode + prefill + reward) on its GPUs; None: no rate
    rates: str = "none stated"  # "assumed" | "measured by pilot" | "measured by probe" | "none stated"
    rate_detail: list = field(default_factory=list)  # (what, role, context, decode, prefill, source)
    known: bool = True  # False: its problem count is unknown, its tokens are 0
    stated: bool = False  # its problem count is the dataset config's `questions` (data not read)
    compute: int | None = None  # Maj@N': its bound in the pair's FLOP kind (tokens)
    shards: int = 1  # data-parallel shard jobs (generate_shard): each does 1/shards of the work

    @property
    def load_s(self) -> float:
        return ENGINE_LOAD_S if self.gpus else 0.0

    def wall_seconds(self, limit: int | None = None) -> float | None:
        """Engine time with a load per attempt of every shard at `limit` minutes (CPU jobs: at
        the CPU rate)."""
        if self.work_s is None:
            return None
        return self.work_s + self.load_s * self.attempts(limit) * self.shards

    def gpu_seconds(self, limit: int | None = None) -> float | None:
        wall = self.wall_seconds(limit)
        return None if wall is None else wall * self.gpus

    def minutes(self) -> int | None:
        """The runtime the job (each of its shards) asks for in one attempt with no limit."""
        if self.work_s is None:
            return None
        return math.ceil(self.work_s / self.shards * SAFETY / 60) + RUNTIME_OVERHEAD_MIN

    def attempts(self, limit: int | None) -> int:
        """Attempts of at most `limit` minutes, each losing RUNTIME_OVERHEAD_MIN to loading."""
        minutes = self.minutes()
        if minutes is None or not limit or minutes <= limit:
            return 1
        useful = max(1, limit - RUNTIME_OVERHEAD_MIN)
        return math.ceil((minutes - RUNTIME_OVERHEAD_MIN) / useful)

    def as_dict(self, limit: int | None) -> dict:
        return {
            "job": self.path,
            "rule": self.rule,
            "gpus": self.gpus,
            **{f"{k}_tokens": v for k, v in asdict(self.tokens).items() if k != "calls"},
            "calls": self.tokens.calls,
            "n_prime": self.n_prime,
            "size_known": self.known,
            "equal_compute": self.equal_compute or None,
            "gpu_seconds": self.gpu_seconds(limit),
            "wall_seconds": self.wall_seconds(limit),
            "runtime_min": self.minutes(),
            "attempts": self.attempts(limit),
            "shards": self.shards,
            "rates": self.rates,
        }


def _problems(job: Job, mirror: str | None, dso: tuple) -> tuple[int | None, bool]:
    """The job's problems (shards round up) and whether the count is the config's stated one."""
    from retrace.planning.workload import problem_count_of

    n, stated = problem_count_of(job.dataset, dso, mirror)
    return (None if n is None else -(-n // job.shards) * job.shards), stated


def _priced(job: Job, cfg: dict, tokens: Bound, probe_dir: Path | None, q: int) -> tuple[float | None, list]:
    """Engine seconds of a job (CPU jobs: wall seconds at the CPU rate) and the rates that
    priced them: each role's generated tokens at its rate at its longest context, prefill at
    the longest role's; the policy's work over its tensor-parallel GPUs, reward scoring at the
    reward model's rate undivided (retrace.planning.rates)."""
    from retrace.planning.devices import policy_gpus, priced_gpus
    from retrace.planning.rates import reward_rate, role_rate

    if not priced_gpus(cfg):  # a served client: its server's GPUs
        from retrace.planning.workload import DEFAULT_CPU_TOK_S, probe_rate

        measured = probe_rate(probe_dir, job.model, job.backend)
        rate, how = (measured, "measured by probe") if measured else (DEFAULT_CPU_TOK_S, "assumed")
        return tokens.generated / rate, [(job.model, "sample", q, rate, None, how)]
    roles = [("sample", 1, q)] if job.equal_compute else role_tokens(cfg["method"], q)
    share = sum(gen for _, gen, _ in roles) or 1
    seconds, prefill_rate = 0.0, None
    detail: list[tuple] = []
    for role, gen, context in sorted(roles, key=lambda r: r[2]):  # the longest context's prefill last
        r = role_rate(cfg, probe_dir, job.model, job.backend, role, context)
        if r is None:
            return None, []
        seconds += tokens.generated * gen / share / r.decode
        detail.append((job.model, role, context, r.decode, r.prefill, r.source))
        prefill_rate = r.prefill
    seconds += max(0, tokens.computed - tokens.generated) / (prefill_rate or 1.0)
    seconds /= policy_gpus(cfg)  # the policy's tensor-parallel GPUs only
    if tokens.reward:
        scorer, mt = cfg["method"]["scorer"], int(cfg["method"]["sampling"]["max_tokens"])
        engine = cfg["backend"].get("engine") or {}
        rr = reward_rate(scorer, probe_dir, job.model, job.backend, engine, q + mt)
        seconds += tokens.reward / rr.decode  # its layers in sequence: one GPU at a time
        detail.append(
            (str(scorer.get("repo") or scorer.get("path")), "reward", q + mt, rr.decode, None, rr.source)
        )
    return seconds, detail


def summary(detail: list) -> str:
    """One word for a job's rates: any pilot's, else any probe's, else assumed."""
    sources = {d[5] for d in detail}
    if not sources:
        return "none stated"
    if any(x.startswith("pilot") for x in sources):
        return "measured by pilot"
    return "measured by probe" if "measured by probe" in sources else "assumed"


def job_bounds(
    jobs: list[Job], mirror: str | None, dso: tuple = (), probe_dir: Path | None = None
) -> list[JobBound]:
    """Every job's bound (jobs of unknown size get zero tokens and no time)."""
    from retrace.planning.devices import priced_gpus as gpus  # a served client: its server's
    from retrace.planning.preflight import question_tokens

    out: dict[str, JobBound] = {}
    # A bound does not depend on the seed (the config differs only in `seed`, the data and the
    # rates not at all): each seed's job takes the first seed's bound, as its own (issue 57: at
    # 30 seeds, sizing every job was most of a cold plan's own work).
    seen: dict[tuple, JobBound] = {}
    for job in sorted(jobs, key=lambda j: bool(j.equal_compute)):  # partners first
        twin = _seed_free(job, out)
        if twin in seen:
            out[job.path] = _as_seed(seen[twin], job)
            continue
        cfg, (n, stated) = job_config(job), _problems(job, mirror, dso)
        rule = "generate_shard" if job.shards > 1 else "generate"
        if n is None:
            out[job.path] = JobBound(job.path, rule, gpus(cfg), Bound(), known=False, shards=job.shards)
            continue
        q = question_tokens(job.dataset, mirror, tuple(dso))
        b = JobBound(job.path, rule, gpus(cfg), problem_bound(cfg["method"], q).scaled(n), shards=job.shards)
        b.stated = stated
        if job.equal_compute:
            _equal_compute(job, cfg, b, out, q)
        b.work_s, b.rate_detail = _priced(job, cfg, b.tokens, probe_dir, q)
        b.rates = summary(b.rate_detail)
        out[job.path] = seen[twin] = b
    return [out[j.path] for j in jobs]


def _seed_free(job: Job, done: dict) -> tuple:
    """What a job's bound depends on: the job but its seed, and for a Maj@N' job whether its
    refinement partner (same seed) is planned, since it is priced from it only then."""
    fields = tuple(v for k, v in vars(job).items() if k != "seed")
    return (fields, bool(job.equal_compute) and partner_path(job) in done)


def _as_seed(b: JobBound, job: Job) -> JobBound:
    """Bound `b` as `job`'s (another seed's): its own path and partner's path."""
    partner = [partner_path(job), b.equal_compute[1]] if b.equal_compute else []
    return replace(b, path=job.path, equal_compute=partner, rate_detail=list(b.rate_detail))


def job_bound(
    job: Job, mirror: str | None, dso: tuple, probe_dir: Path | None, planned: list[Job]
) -> JobBound:
    """One job's bound; a Maj@N' job's needs its refinement partner from `planned`."""
    partners = [partner_path(job)] if job.equal_compute else []
    with_partners = [j for j in planned if j.path in partners] + [job]
    return job_bounds(with_partners, mirror, dso, probe_dir)[-1]


def partner_path(job: Job) -> str:
    """The refinement job a Maj@N' job is priced from (same model, dataset and seed)."""
    return Job(job.model, job.backend, job.dataset, job.equal_compute[0], "", job.seed).path


def _equal_compute(job: Job, cfg: dict, b: JobBound, done: dict, q: int) -> None:
    """A Maj@N' job's bound from its refinement partner's in the pair's kind. Generated tokens:
    the partner's plus one Maj@N rollout (it adds samples until it spent the refinement's
    compute; extra samples drawn as its first N are, so their mean length is theirs). Calls and
    prompts: at most N'_max samples of each problem, N'_max the N' that pricing would give if
    refinement spent its whole bound and every Maj@N sample were only the minimum sample length
    (retrace.methods.budget.min_sample_tokens, the floor N' is priced with at run time)."""
    from retrace.methods.budget import min_sample_tokens

    kind, partner = job.equal_compute[2], partner_path(job)
    if partner not in done:  # not planned: priced as Maj@N (never in a planned experiment)
        return
    majority, n = b.tokens, int(cfg["method"]["n"])
    refine = done[partner].tokens.counted(kind)
    problems = majority.calls // n
    least = max(1, problems * n * min_sample_tokens(cfg["method"]))  # Maj@N's cost, floored
    b.n_prime = n + max(0, (refine - least) * n // least)
    calls = b.n_prime * problems
    total = refine + majority.counted(kind) // n
    b.tokens = Bound(total, calls * q, total, calls)
    b.compute, b.equal_compute = total, [partner, kind]


def equal_compute_ratios(bounds: list[JobBound]) -> list[tuple[str, float]]:
    """(Maj@N' job, its bound over its refinement's in the pair's FLOP kind) for every pair."""
    by_path = {b.path: b for b in bounds}
    out = []
    for b in bounds:
        if b.equal_compute and b.equal_compute[0] in by_path:
            partner, kind = b.equal_compute
            base = by_path[partner].tokens.counted(kind)
            if base and b.compute is not None:
                out.append((b.path, b.compute / base))
    return out
