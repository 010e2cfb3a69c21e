"""retrace's fast composition agrees with hydra.compose on every config in the repository."""

from __future__ import annotations

import pytest

from retrace.config.compose import ConfigError, compose, compose_with_hydra, group_options

OVERRIDES = [
    (),
    ("method.sampling.max_tokens=64", "backend.engine.n_parallel=3"),
    ("dataset.limit=5", "model.params=12", "method.done_markers=[a,'b c']"),
]


@pytest.mark.parametrize("group", ["model", "dataset", "method", "backend"])
def test_every_option_composes_like_hydra(group):
    for option in group_options(group):
        assert compose({group: option}) == compose_with_hydra({group: option}), option


@pytest.mark.parametrize("overrides", OVERRIDES)
def test_overrides_parse_like_hydra(overrides):
    sel = {"model": "smollm2-135m-q41", "dataset": "gsm8k", "method": "majority", "backend": "llamacpp"}
    if any(o.startswith("method.done_markers") for o in overrides):
        sel["method"] = "beam"
    assert compose(sel, overrides) == compose_with_hydra(sel, overrides)


def test_a_malformed_override_is_a_config_error():
    with pytest.raises(ConfigError, match="bad override"):
        compose({"method": "majority"}, ["method.n=[1,"])
