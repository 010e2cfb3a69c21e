"""Helpers for unit tests on the scripted backend (retrace.backends.scripted): a fake model
manifest, chat requests and a CachedLLM whose engine constructions are counted.

    llm, engines = scripted_llm(tmp_path, {"script": ["x"]})
    llm.generate([chat("hi")]); assert len(engines) == 1 and engines[0].calls == 1
"""

from __future__ import annotations

from pathlib import Path

from retrace.backends.scripted import ScriptedBackend
from retrace.engine.llm import CachedLLM
from retrace.store.cache import RequestCache
from retrace.util.records import Message, Request, Sampling

FINGERPRINT = "f" * 64


def manifest(fingerprint: str = FINGERPRINT, chat_template: str | None = None) -> dict:
    return {
        "name": "fake-model",
        "fingerprint": fingerprint,
        "params": 1000,
        "chat_template": chat_template,
        "gguf": None,
        "hf_dir": None,
    }


def chat(text: str, sample_index: int = 0, **sampling) -> Request:
    return Request(
        messages=(Message("user", text),), sampling=Sampling(**sampling), sample_index=sample_index, tag=text
    )


def scripted_llm(
    cache: Path | RequestCache, engine: dict, model: dict | None = None
) -> tuple[CachedLLM, list[ScriptedBackend]]:
    """A CachedLLM on the scripted backend; the list collects every engine it constructs."""
    model = model or manifest()
    if not isinstance(cache, RequestCache):
        cache = RequestCache(Path(cache) / "requests.sqlite", job="test")
    engines: list[ScriptedBackend] = []

    def factory() -> ScriptedBackend:
        engines.append(ScriptedBackend(model, engine))
        return engines[-1]

    return CachedLLM(factory, "scripted", model, cache), engines


def engine_requests(engines: list[ScriptedBackend]) -> list[Request]:
    """Every request that reached any of `engines`, in order."""
    return [r for e in engines for r in e.requests_seen]


CONFIG = Path(__file__).resolve().parents[2] / "config"


def method_cfg(name: str, **changes):
    """config/method/<name>.yaml as the typed settings a method takes (retrace.config.settings),
    with top-level keys replaced by `changes`; `sampling={...}` changes keys of that block."""
    import yaml

    from retrace.config.settings import method_settings

    cfg = yaml.safe_load((CONFIG / "method" / f"{name}.yaml").read_text())
    cfg["sampling"].update(changes.pop("sampling", {}))
    cfg.update(changes)
    return method_settings(cfg, f"config/method/{name}.yaml")


def smoke_math_problems(n: int) -> list:
    """The first n problems of the bundled maths smoke set."""
    from retrace.util.registry import TASKS

    loaded, _ = TASKS.get("smoke_math").load(
        {"name": "smoke_math", "source": "bundled", "bundled_path": "smoke_math.jsonl"}, mirror=None
    )
    return loaded[:n]


class ExactTask:
    """A fake task: the answer is the stripped text; equal strings are the same answer."""

    def extract_answer(self, text, problem):
        return text.strip()

    def is_correct(self, answer, problem):
        return answer == problem.gold

    def same_answer(self, a, b):
        return a == b
