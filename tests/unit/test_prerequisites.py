"""Skips that can be counted (tests/prerequisites.py): every skip names the prerequisite it lacks,
and RETRACE_REQUIRE_<KIND>=1 turns that skip into a failure, as CI sets for what it provides."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.prerequisites import KINDS, kind_of

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def _reason(call: ast.Call) -> ast.AST | None:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else None
    if name == "skip":
        return call.args[0] if call.args else None
    if name == "skipif":
        return next((k.value for k in call.keywords if k.arg == "reason"), None)
    return None


def _head(node: ast.AST | None) -> str:
    """The literal start of a reason (a string, or an f-string's first literal part)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return ""


def test_every_skip_in_the_tests_names_its_prerequisite():
    untagged = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == TESTS / "prerequisites.py":  # missing(kind, text) tags its own reasons
            continue
        for call in ast.walk(ast.parse(path.read_text())):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                if call.func.attr in ("skip", "skipif") and not re.match(r"\[(\w+)\] ", _head(_reason(call))):
                    untagged.append(f"{path.relative_to(REPO)}:{call.lineno}")
                elif call.func.attr in ("skip", "skipif"):
                    assert kind_of(_head(_reason(call))) in KINDS, f"{path}:{call.lineno}"
    assert not untagged, f"skips without a [KIND] (tests/prerequisites.py): {untagged}"


def test_an_importorskip_counts_as_a_missing_package():
    assert kind_of("could not import 'vllm': No module named 'vllm'") == "PACKAGE"
    assert kind_of("[MIRROR] no mirror at /x") == "MIRROR"
    assert kind_of("a reason without a kind") is None


PROBE = """
import pytest

pytest.importorskip("retrace_no_such_package")
"""
CASES = """
import pytest

def test_mirror():
    pytest.skip("[MIRROR] no mirror here")

@pytest.mark.skipif(True, reason="[CUDA] needs a CUDA device")
def test_cuda():
    pass
"""


def run_pytest(tmp_path: Path, env: dict) -> str:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa\n"
    )
    (tmp_path / "test_cases.py").write_text(textwrap.dedent(CASES))
    (tmp_path / "test_module.py").write_text(textwrap.dedent(PROBE))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RETRACE_REQUIRE_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rfsE",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "variable,fails",
    [
        ("", ()),
        ("MIRROR", ("test_mirror",)),
        ("CUDA", ("test_cuda",)),
        ("PACKAGE", ("test_module.py",)),
    ],
)
def test_a_skip_fails_where_its_prerequisite_is_required(tmp_path, variable, fails):
    out = run_pytest(tmp_path, {f"RETRACE_REQUIRE_{variable}": "1"} if variable else {})
    summary = out.strip().splitlines()[-1]
    if not fails:
        assert "3 skipped" in summary and "failed" not in summary and "error" not in summary, out
        return
    for name in fails:
        assert re.search(rf"(FAILED|ERROR) .*{name}", out), out
    assert f"RETRACE_REQUIRE_{variable}=1 but" in out, out
