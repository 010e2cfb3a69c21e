"""Typed method settings (retrace.config.settings): built once from the composed YAML, every
bad key or type one line naming the file and the key, no default written into code."""

from __future__ import annotations

import pytest

from retrace.config.compose import ConfigError, compose, group_options
from retrace.config.settings import MethodSettings, method_settings
from retrace.planning.plan import Job
from retrace.util.records import Sampling

SOURCE = "config/method/majority.yaml"


def majority(**changes) -> dict:
    block = compose({"method": "majority"})["method"]
    for key, value in changes.items():
        *path, last = key.split(".")
        node = block
        for part in path:
            node = node[part]
        if value is DROP:
            del node[last]
        else:
            node[last] = value
    return block


DROP = object()


@pytest.mark.parametrize("option", group_options("method"))
def test_every_method_file_builds_typed_settings(option):
    s = method_settings(compose({"method": option})["method"], f"config/method/{option}.yaml")
    assert isinstance(s.sampling, Sampling) and s.sampling.seed == 0
    assert isinstance(s.scoring.n_boot, int) and s.scoring.vote in ("explicit", "any")
    assert s["name"] == s.name  # the method's own keys, as the YAML states them


def test_a_job_reads_its_settings_with_overrides_applied():
    job = Job(
        "smollm2-135m-q41",
        "llamacpp",
        "smoke_math",
        "maj8",
        "majority",
        0,
        ("method.sampling.max_tokens=77",),
    )
    s = job.method_settings()
    assert (s.sampling.max_tokens, s.sampling.temperature, s["n"]) == (77, 0.7, 4)
    assert s.scoring.n_boot == 2000 and s.source == "config/method/majority.yaml"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"sampling.top_p": "high"},
            "config/method/majority.yaml: method.sampling.top_p takes a number, got 'high'",
        ),
        ({"sampling.max_tokens": 1.5}, "method.sampling.max_tokens takes an integer, got 1.5"),
        ({"sampling.temperature": True}, "method.sampling.temperature takes a number, got True"),
        ({"sampling.stop": "\n"}, "method.sampling.stop takes a list of strings"),
        (
            {"sampling.seed": 3},
            "unknown key method.sampling.seed; valid keys: ignore_eos, logprobs, max_tokens",
        ),
        ({"sampling.max_tokens": DROP}, "method.sampling.max_tokens is missing"),
        ({"scoring.n_boot": "2000"}, "config/method/majority.yaml: method.scoring.n_boot takes an integer"),
        ({"scoring.bootstrap": 10}, "unknown key method.scoring.bootstrap; valid keys: n_boot, seed, vote"),
        ({"scoring": DROP}, "config/method/majority.yaml: method.scoring is missing"),
        ({"sampling": [0.7]}, "method.sampling takes a mapping"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_file_and_key(changes, message):
    with pytest.raises(ConfigError) as e:
        method_settings(majority(**changes), SOURCE)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_settings_are_read_only_and_typed():
    s = method_settings(majority(**{"sampling.stop": ["\n\n"]}), SOURCE)
    assert s.sampling.stop == ("\n\n",)  # a tuple, as a request's
    with pytest.raises(TypeError):
        s.block["n"] = 8  # type: ignore[index]
    with pytest.raises(AttributeError):
        s.name = "other"  # type: ignore[misc]
    assert isinstance(s, MethodSettings) and dict(s)["n"] == 4
