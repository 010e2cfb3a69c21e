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
(`equal_compute`) is bounded by its partners: it spends about what its refinement spent, in
the pair's FLOP kind, so its tokens are at most the refinement's bound plus one rollout of Maj@N
(all priced as generated tokens; N' at these bounds is reported beside it). Its extra samples
are drawn as its first N are, so their mean length is theirs: a bound in that sense, not against
extra samples all far longer than the first N.

Time: generated tokens at the decode rate, prompt tokens not reused (structural prefix reuse,
retrace.scoring.compute) at the prefill rate, reward tokens at REWARD_TOK_S, plus one engine load
(ENGINE_LOAD_S) per attempt at max_runtime. These are each label's bounds (`--json`'s
`labels`); the jobs the workflow runs, cell parts that sum their labels' and shard jobs, are
sized from them by retrace.planning.parts (`--json`'s `jobs`, the estimate, `--check`). Rates come from a `retrace probe` result of the model and backend
(results/probe/<model>/<backend>.json: `tok_s`, `prefill_tok_s`) when one exists, else from the
backend's stated `throughput_tok_s` (prefill PREFILL_X times that): `rates.how` says which.
A job's wall time is its GPU time over its tensor-parallel GPUs; with SAFETY it is what the job
asks SLURM for, and `attempts(limit)` how many runs of at most `limit` minutes it needs (each
attempt loads the engine again and resumes from the request cache). Not covered: time waiting
in the queue, and a cache shared with other jobs (a bound assumes nothing is cached).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from retrace.planning.plan import Job, job_config

SAFETY = 1.5  # asked runtime over the bound's wall time (a shared node, stragglers)
RUNTIME_OVERHEAD_MIN = 30  # per attempt: engine load, CUDA graphs, the first batch's warm-up
ENGINE_LOAD_S = 600.0  # assumed: weights from shared disk + vLLM's CUDA graph capture
PREFILL_X = 8.0  # assumed prefill rate over the stated decode rate (vLLM on one GPU: 5-20x)
REWARD_TOK_S = 2000.0  # assumed: an 8B reward model in transformers, batch 4, bf16


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


def refine_bound(m: dict, q: int) -> Bound:
    """N rollouts: a sample, then D rounds of continue, critique (a call only for critic=model)
    and correct, each call reading the rollout's history so far (retrace.planning.preflight's templates)."""
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
    history = int(m["sampling"]["max_tokens"])
    one = Bound(history, q, 0, 1)
    for _ in range(int(m["depth"])):
        for _role_name, template, out, call in steps:
            if call:
                one.prompt += q + history + template
                one.generated += out
                one.calls += 1
            history += template + out
    n = int(m["n"])
    total = one.scaled(n)
    total.computed = q + n * history  # every prompt is a prefix of the rollout's final history
    return total


def best_of_n_bound(m: dict, q: int) -> Bound:
    """The N rollouts, then either N judge calls or a reward model reading each rollout."""
    from retrace.planning.preflight import _template_tokens

    b = majority_bound(m, q)
    mt, n, scorer = int(m["sampling"]["max_tokens"]), int(m["n"]), m.get("scorer") or {}
    if scorer.get("name", "llm_judge") == "llm_judge":
        judge = (
            q
            + mt
            + _template_tokens(m["templates"]["judge"], partial=False, question="", solution="", choices=None)
        )
        out = int(scorer.get("max_tokens", 1))
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


# ---------------------------------------------------------------- rates
@dataclass(frozen=True)
class Rates:
    decode: float  # generated tok/s of one engine per GPU
    prefill: float
    how: str  # "measured by probe" | "assumed" (the backend's stated throughput)


def rates(cfg: dict, probe_dir: Path | None, model: str, backend: str) -> Rates | None:
    """The probe's measured rates for (model, backend), else the stated ones (None: none stated)."""
    probe = _probe(probe_dir, model, backend)
    if probe.get("tok_s"):
        decode = float(probe["tok_s"])
        return Rates(decode, float(probe.get("prefill_tok_s") or decode * PREFILL_X), "measured by probe")
    stated = (cfg["backend"].get("engine") or {}).get("throughput_tok_s")
    return Rates(float(stated), float(stated) * PREFILL_X, "assumed") if stated else None


def _probe(probe_dir: Path | None, model: str, backend: str) -> dict:
    if probe_dir is None:
        return {}
    try:
        found = json.loads((Path(probe_dir) / model / f"{backend}.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


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
    rates: str = "none stated"
    known: bool = True  # False: its problem count is unknown (no mirror), its tokens are 0
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


def _problems(job: Job, mirror: str | None, dso: tuple) -> int | None:
    from retrace.planning.workload import problem_count

    n = problem_count(job.dataset, dso, mirror)
    return None if n is None else -(-n // job.shards) * job.shards  # shards round up


def _priced(job: Job, cfg: dict, tokens: Bound, probe_dir: Path | None) -> tuple[float | None, str]:
    """Engine seconds of a job on its GPUs (CPU jobs: wall seconds at the CPU rate)."""
    from retrace.planning.devices import priced_gpus

    g = priced_gpus(cfg)
    if not g:
        from retrace.planning.workload import DEFAULT_CPU_TOK_S, probe_rate

        rate = probe_rate(probe_dir, job.model, job.backend)
        how = "measured by probe" if rate else "assumed"
        return tokens.generated / (rate or DEFAULT_CPU_TOK_S), how
    r = rates(cfg, probe_dir, job.model, job.backend)
    if r is None:
        return None, "none stated"
    prefill = max(0, tokens.computed - tokens.generated)
    seconds = tokens.generated / r.decode + prefill / r.prefill + tokens.reward / REWARD_TOK_S
    return seconds / g, r.how


def job_bounds(
    jobs: list[Job], mirror: str | None, dso: tuple = (), probe_dir: Path | None = None
) -> list[JobBound]:
    """Every job's bound (jobs of unknown size get zero tokens and no time)."""
    from retrace.planning.devices import priced_gpus as gpus  # a served client: its server's
    from retrace.planning.preflight import question_tokens

    out: dict[str, JobBound] = {}
    for job in sorted(jobs, key=lambda j: bool(j.equal_compute)):  # partners first
        cfg, n = job_config(job), _problems(job, mirror, dso)
        rule = "generate_shard" if job.shards > 1 else "generate"
        if n is None:
            out[job.path] = JobBound(job.path, rule, gpus(cfg), Bound(), known=False, shards=job.shards)
            continue
        q = question_tokens(job.dataset, mirror, tuple(dso))
        b = JobBound(job.path, rule, gpus(cfg), problem_bound(cfg["method"], q).scaled(n), shards=job.shards)
        if job.equal_compute:
            _equal_compute(job, cfg, b, out)
        b.work_s, b.rates = _priced(job, cfg, b.tokens, probe_dir)
        out[job.path] = b
    return [out[j.path] for j in jobs]


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


def _equal_compute(job: Job, cfg: dict, b: JobBound, done: dict) -> None:
    """A Maj@N' job's bound: its refinement partner's in the pair's kind plus one Maj@N rollout
    (it stops adding samples once it spent the refinement's measured compute); all of it
    priced as generated tokens, as N' samples each reading the shared prompt once."""
    kind, partner = job.equal_compute[2], partner_path(job)
    if partner not in done:  # not planned: priced as Maj@N (never in a planned experiment)
        return
    majority, n = b.tokens, int(cfg["method"]["n"])
    total = done[partner].tokens.counted(kind) + majority.counted(kind) // n
    b.n_prime = math.ceil(n * total / max(1, majority.counted(kind)))
    calls = b.n_prime * (majority.calls // n)  # N' samples of each problem
    b.tokens = Bound(total, calls * (majority.prompt // max(1, majority.calls)), total, calls)
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
