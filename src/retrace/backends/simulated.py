"""A simulated engine: instant answers, correct with a planted probability. NOT a model.

    from retrace.util.registry import BACKENDS
    Sim = BACKENDS.get("simulated")
    sim = Sim(manifest, {"problems": "results/data/math500.jsonl", "dataset": "math500",
                         "label": "refine", "effects": "effects.yaml"})
    sim.generate(requests)   # one Completion per request, no model loaded

Used by `retrace rehearse` to walk an experiment before paying for it; every result it
gives is labelled simulated (backend name "simulated" in provenance and cache keys, the
`engine` column of claims.csv, the report banner), so it cannot pass for a real run.

How an answer is drawn (all from a SHA-256 of the request's identity, so a rerun gives
the same bytes and no state is kept):
- Each question gets a difficulty: p_q = Beta(base_accuracy * concentration,
  (1 - base_accuracy) * concentration) quantile of a hash of (model, dataset, question).
- A planted effect for (model, dataset, label) moves p_q to p_q + c (1 - p_q), c chosen so
  the mean rises by exactly its points (effects YAML, see `load_effects`); else null.
- Correct iff Phi(rho z_q + sqrt(1 - rho^2) z_s) < p, with z_q shared by every method and
  seed on the question (`correlation` rho: methods agree on hard questions, as real ones
  do) and z_s drawn per sample from (seed, sample index, tag). At temperature 0 the seed
  and sample index are left out, so seeds and samples are identical, as a real engine's.
- The text is the gold answer (\\boxed{gold}, or "Answer: X" for multiple choice) or the
  question's one wrong answer (`wrong_answer`); the gold comes from the problems file
  (`problems`), the question id from the tag.
- A judge's request (tag `judge:<id>`, engine/scorers.py) is answered "Yes" or "No" by a
  fair coin on the judged text: an uninformative verifier, so RM@N and beam search pick
  among their samples at random (no planted verifier skill).
- ART's requests (tags `art`, `art-baseline`, `code_generate`) get texts in ART's program
  grammar whose answer is drawn the same way, keyed by the job's label (art/simulated.py).
- Token counts: generated ~ lognormal around `tokens_mean`, cut at max_tokens (finish
  "length", no answer). The text declares them ("Simulated reasoning (N tokens). The answer
  is ..."), and a prompt's tokens are its words with every such marker counting what it
  declares (`token_count`): a refinement history that carries earlier answers grows as a
  real one does, so compute accounting and Maj@N' pricing (prefix reuse included) work.
- For the cluster chaos test (tests/cluster/test_slurm_chaos.py), a slow engine: `delay_s`
  (default 0) is how long each `generate` call (one batch, one cache commit) waits before
  answering (jobs long enough to be cancelled mid-run); with `hold_file` set (a path, relative
  to the job's folder), every batch after a job's first waits while that file exists (a job
  held mid-run until SLURM ends it at its time limit; its retry, the file gone, goes on).
  Answers do not depend on either, and neither do cache or rerun keys.
Not covered: nothing about a method's mechanics is simulated (a vote over identical
samples is one answer); only what reaches the claims engine is.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retrace.backends.base import Backend, BackendError
from retrace.util.records import Completion, Request
from retrace.util.registry import BACKENDS

DEFAULTS = {"base_accuracy": 0.4, "concentration": 2.0, "correlation": 0.6, "tokens_mean": 300}


def unit(*parts) -> float:
    """A uniform in (0, 1) from the SHA-256 of `parts` (stable across runs and machines)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


MARKER = "Simulated reasoning"
_DECLARED = re.compile(re.escape(MARKER) + r" \((\d+) tokens\)\.?")


def difficulty_settings(config_dir: Path | None = None) -> dict:
    """The engine's difficulty settings (base_accuracy, concentration, correlation) as the
    config in `config_dir` (default: config/) composes them; what planted truths are read against."""
    from retrace.config.compose import CONFIG_DIR, compose

    engine = compose({"backend": "simulated"}, config_dir=config_dir or CONFIG_DIR)["backend"]["engine"]
    keys = ("base_accuracy", "concentration", "correlation")
    return {k: float(DEFAULTS[k] if engine.get(k) is None else engine[k]) for k in keys}


def family_texts() -> dict[str, Callable[[Any, Request], str]]:
    """Request tag -> text(backend, request) of the method families whose requests have a
    grammar of their own (retrace.config.families `simulated_texts`: ART's programs)."""
    from retrace.config.families import FAMILIES

    return {tag: fn for family in FAMILIES.all() for tag, fn in family.simulated_texts().items()}


def token_count(text: str) -> int:
    """Tokens of a text: its whitespace words, each simulated reasoning marker counting the
    tokens it declares. Additive over texts joined by spaces, so a refinement history (every
    prompt a prefix of the next) counts as the engine's prefix cache would see it."""
    declared = sum(int(m.group(1)) - len(m.group(0).split()) for m in _DECLARED.finditer(text))
    return len(text.split()) + declared


def wrong_answer(gold: str) -> str:
    """The one wrong answer of a question: a plain integer no gold is (a vote then weighs right
    against one wrong answer, the hardest case for plurality; an integer keeps the checker's
    symbolic comparison cheap, where "gold + 1" sent every vote through sympy)."""
    return "-100003" if gold.strip() != "-100003" else "-100019"


def load_effects(source) -> list[dict]:
    """Planted effects: a YAML file (or its parsed mapping) with
    `effects: [{label: refine, points: 8, datasets: [math500], models: [...]}]`;
    datasets/models omitted = all. Points are accuracy points over the null (every other label)."""
    if not source:
        return []
    if isinstance(source, (str, Path)):
        from retrace.util.yamlfile import load_yaml

        source = load_yaml(Path(source))
    effects = (source or {}).get("effects") or []
    for i, e in enumerate(effects):
        if not isinstance(e, dict) or "label" not in e or not isinstance(e.get("points"), (int, float)):
            raise BackendError(f"effects[{i}]: want {{label: L, points: P, datasets: [...]}}, got {e!r}")
    return effects


def planted_points(effects: list[dict], model: str, dataset: str, label: str) -> float:
    """Sum of the planted points that apply to (model, dataset, label)."""
    return sum(
        e["points"]
        for e in effects
        if e["label"] == label
        and dataset in (e.get("datasets") or [dataset])
        and model in (e.get("models") or [model])
    )


@BACKENDS.register("simulated")
class SimulatedBackend(Backend):
    """Answers from planted probabilities; see the module docstring."""

    name = "simulated"
    engine_kinds = {
        "problems": "str_or_null",
        "dataset": "str_or_null",
        "label": "str_or_null",
        "effects": "str_or_null",
        "base_accuracy": "number",
        "concentration": "number",
        "correlation": "number",
        "tokens_mean": "number",
        "batch_size": "int",
        "delay_s": "number",
        "hold_file": "str_or_null",
        "n_threads": "int",
    }

    def __init__(self, model: dict, engine: dict | None = None):
        super().__init__(model, engine)
        self.settings = {**DEFAULTS, **{k: v for k, v in self.engine.items() if v is not None}}
        self.effects = load_effects(self.engine.get("effects"))
        self.problems = self._problems(self.engine.get("problems"))
        self._batches = 0  # generate calls so far (hold_file)

    @staticmethod
    def _problems(path) -> dict:
        if not path:
            raise BackendError("simulated backend needs engine['problems'] (the problems JSONL)")
        from retrace.store.data import read_problems

        return {p.id: p for p in read_problems(path)}

    def probability(self, qid: str) -> float:
        """The planted probability of a correct answer to question `qid` for this job's label."""
        from scipy.special import betaincinv

        # dataset and label: config/backend/simulated.yaml states both (rehearse sets them per job)
        s, model, dataset = self.settings, self.model.get("name", ""), self.engine["dataset"]
        a, b = s["base_accuracy"] * s["concentration"], (1 - s["base_accuracy"]) * s["concentration"]
        p = float(betaincinv(a, b, unit("difficulty", model, dataset, qid)))
        points = planted_points(self.effects, model, dataset, self.engine["label"]) / 100
        if points >= 0:
            return p + min(1.0, points / max(1e-9, 1 - s["base_accuracy"])) * (1 - p)
        return p * (1 - min(1.0, -points / max(1e-9, s["base_accuracy"])))

    def _correct(self, qid: str, request: Request) -> bool:
        from statistics import NormalDist

        normal, rho = NormalDist(), float(self.settings["correlation"])
        z_q = normal.inv_cdf(unit("question", self.model.get("name"), qid))
        greedy = request.sampling.temperature == 0
        noise = () if greedy else (request.sampling.seed, request.sample_index)
        z_s = normal.inv_cdf(unit("sample", qid, request.tag, *noise))
        return normal.cdf(rho * z_q + math.sqrt(1 - rho * rho) * z_s) < self.probability(qid)

    def _question(self, tag: str) -> str:
        """The problem id a method's tag starts with: the longest known id ending at "#", ":"
        or "/" (ids may hold "/", as OlympiadBench's do; methods append "#i", ":step", "/d1")."""
        for end in sorted([len(tag)] + [i for i, ch in enumerate(tag) if ch in "#:/"], reverse=True):
            if tag[:end] in self.problems:
                return tag[:end]
        raise BackendError(f"simulated backend: tag {tag!r} names no problem of engine['problems']")

    def _text(self, request: Request) -> tuple[str, str]:
        """(the answer part of the text, question id)."""
        if request.tag.startswith("judge:"):  # a verifier's yes/no: a coin on the judged text
            qid, judged = request.tag[len("judge:") :], [m.content for m in request.messages]
            return ("Yes" if unit("judge", qid, judged, request.prompt) < 0.5 else "No"), qid
        qid = self._question(request.tag)
        problem = self.problems[qid]
        right = self._correct(qid, request)
        if problem.choices:
            letters = [chr(65 + i) for i in range(len(problem.choices))]
            wrong = [x for x in letters if x != problem.gold] or letters
            pick = problem.gold if right else wrong[int(unit("wrong", qid, request.tag) * len(wrong))]
            return f"\nAnswer: {pick}", qid
        answer = problem.gold if right else wrong_answer(problem.gold)
        return f" The answer is \\boxed{{{answer}}}.", qid

    def _tokens(self, request: Request, qid: str) -> tuple[int, str]:
        from statistics import NormalDist

        keep = () if request.sampling.temperature == 0 else (request.sampling.seed, request.sample_index)
        z = NormalDist().inv_cdf(unit("tokens", qid, request.tag, *keep))
        drawn = max(1, int(float(self.settings["tokens_mean"]) * math.exp(0.5 * z - 0.125)))
        cap = request.sampling.max_tokens
        return (cap, "length") if drawn >= cap else (drawn, "stop")

    def _complete(self, request: Request) -> Completion:
        texts = family_texts()
        if request.tag in texts:  # e.g. ART's programs, baselines and code tool (art/simulated.py)
            return self._family(request, texts[request.tag])
        answer, qid = self._text(request)
        prompt = (
            request.prompt if request.prompt is not None else " ".join(m.content for m in request.messages)
        )
        if request.tag.startswith("judge:"):  # a verdict is one token, never cut
            text, finish = answer, "stop"
        else:
            drawn, finish = self._tokens(request, qid)
            # the reasoning marker stands for the drawn tokens less the answer's own words
            words = len(answer.split())
            text = (
                f"{MARKER} ({max(1, drawn - words)} tokens).{answer}"
                if finish == "stop"
                else f"{MARKER} ({drawn} tokens)"  # cut at max_tokens: no answer
            )
        return Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=token_count(prompt),
            generated_tokens=token_count(text),
        )

    def _family(self, request: Request, text: Callable[[Any, Request], str]) -> Completion:
        """A method family's texts in its own grammar (ART's programs); never cut (a few dozen words)."""
        out = text(self, request)
        prompt = (
            request.prompt if request.prompt is not None else " ".join(m.content for m in request.messages)
        )
        return Completion(
            text=out,
            finish_reason="stop",
            prompt_tokens=token_count(prompt),
            generated_tokens=token_count(out),
        )

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        if requests:
            self._slow_down()
        return [self._complete(r) for r in requests]

    def _slow_down(self) -> None:
        """Wait as `delay_s` and `hold_file` say (see the module docstring)."""
        hold = self.engine.get("hold_file")
        while hold and self._batches and Path(hold).exists():
            time.sleep(0.5)
        self._batches += 1
        time.sleep(float(self.engine.get("delay_s") or 0))

    @classmethod
    def rerun_settings(cls, engine: dict) -> dict:
        """The planted settings and the effects' content (not their file's path): new effects
        are a new simulation, so `retrace rehearse --effects` in a finished run directory reruns
        every simulated job rather than checking old answers against new truth."""
        return {
            **super().rerun_settings(engine),
            "simulated": {k: engine.get(k) for k in DEFAULTS},
            "effects": load_effects(engine.get("effects")),
        }

    @classmethod
    def identity(cls, model: dict, engine: dict) -> dict:
        """Simulated answers never share a cache key with a real engine's; the planted
        settings are part of the key (a new effects file is a new simulation), and so is this
        file (how answers are drawn: an edit must not serve answers drawn the old way)."""
        from retrace.util.hashing import sha256_file

        planted = {k: engine.get(k) for k in (*DEFAULTS, "label", "dataset")}
        effects = load_effects(engine.get("effects"))
        code = [sha256_file(Path(__file__)), sha256_file(Path(__file__).parents[1] / "art" / "simulated.py")]
        return {
            **super().identity(model, engine),
            "simulated": True,
            "planted": planted,
            "effects": effects,
            "code": code,
        }
