"""retrace.util.presigned: a workflow function's parameters read once, through Snakemake's hook."""

from __future__ import annotations

import inspect

import pytest
from snakemake.common import get_function_params, get_input_function_aux_params

from retrace.util.presigned import presigned


def test_snakemake_passes_a_presigned_function_what_it_names_without_reading_its_signature_again(monkeypatch):
    def needs(wildcards, input):
        return input

    f = presigned(needs)
    assert f is needs

    def no_more(_func):
        raise AssertionError("inspect.signature read again")

    monkeypatch.setattr(inspect, "signature", no_more)
    assert list(get_function_params(f)) == ["wildcards", "input"]
    # Snakemake hands it only the arguments it names, as it does an unmarked function
    assert get_input_function_aux_params(f, {"input": 1, "output": 2}) == {"input": 1}
    with pytest.raises(AssertionError, match="read again"):
        get_function_params(lambda w: w)  # an unmarked one: read at each call
