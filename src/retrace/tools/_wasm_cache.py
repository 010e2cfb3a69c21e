"""The compiled WASM runtime's cache: compiled once, its digest recorded, verified at every load.

    from retrace.tools import _wasm_cache
    runtime = _wasm_cache.Runtime(sha256, runtime_path, engine)  # what wasm_exec.py runs
    path = _wasm_cache.compiled_module("results/cache/wasm", runtime)  # compiles on first use (~15-35 s)
    fd, record = _wasm_cache.load("results/cache/wasm", runtime)        # the verified module, open
    record["sha256"]                                                     # the digest of what will run

The runtime (its pinned sha256, its verified file, the engine configuration) is the caller's,
tools/wasm_exec.py's, handed in: this module never imports its caller.

Layout of the cache folder (tools/wasm_exec.py's `cache_dir`), `key` naming the runtime's
sha256 and the wasmtime version (a module only loads into the engine that compiled it):
    <key>.json                {"module": "<key>-<sha16>.cwasm", "sha256": ..., "runtime_sha256": ...,
                               "wasmtime": ...}: written when the module was compiled
    <key>-<sha16>.cwasm       the serialised module: native code that the worker maps and runs
Each is written to a temporary file and renamed into place, the module first, so a record
names only a whole module, and concurrent compilers never leave a torn file.

The module is used only when
- the folder, the record and the module belong to the caller's uid and nobody else can write
  them (else it is refused with the reason: whoever can write there can run code as the caller);
- the module's sha256, computed through the descriptor the worker then loads (so a file swapped
  after the check is not the one that runs), equals the digest recorded at compile time; and
  the record names the pinned runtime and the installed wasmtime.
Not covered: the caller's own uid rewriting both the record and the module (that uid could as
well edit this code). Digests are cached per process by file identity (device, inode, size,
mtime, ctime), so a module is hashed once (~0.1 s for its ~30 MB) until it changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from retrace.tools._hostfs import read_capped

_DIGESTS: dict[tuple[int, ...], str] = {}


@dataclass(frozen=True)
class Runtime:
    """The WASM runtime a cache holds compiled: its pinned sha256, the function giving its
    verified file, and the function building the engine it is compiled for and loaded into."""

    sha256: str
    path: Callable[[], Path]
    engine: Callable[[], Any]


class CacheRefused(ValueError):
    """The compiled-module cache cannot be trusted; nothing from it was run."""


def _key(runtime: Runtime) -> str:
    return f"python-3.12.0-{runtime.sha256[:16]}-wasmtime{version('wasmtime')}-fuel"


def _folder(cache: str | os.PathLike) -> Path:
    folder = Path(cache)
    folder.mkdir(parents=True, exist_ok=True)
    _check_private(folder, os.stat(folder))
    return folder


def _check_private(path: Path, st: os.stat_result) -> None:
    why = None
    if st.st_uid != os.geteuid():
        why = f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        who = "others" if st.st_mode & 0o002 else "its group"
        why = f"writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    if why:
        raise CacheRefused(
            f"{path}: refusing the compiled WASM module cache: it is {why}, and whoever can write "
            "it can run code as this user. Use a private folder (chmod go-w, or set "
            "$RETRACE_WASM_CACHE / tools.code_execute.cache_dir)"
        )


def compiled_module(cache: str | os.PathLike, runtime: Runtime) -> Path:
    """Path of the verified compiled runtime, compiling and recording it first if needed."""
    fd, record = load(cache, runtime)
    os.close(fd)
    return _folder(cache) / record["module"]


def load(cache: str | os.PathLike, runtime: Runtime) -> tuple[int, dict]:
    """(a read-only descriptor of the verified module, its record); compiles on first use.
    Raises CacheRefused, naming the file and the remedy, when any check fails."""
    folder = _folder(cache)
    key = _key(runtime)
    if not os.path.lexists(folder / f"{key}.json"):
        _compile(folder, key, runtime)
    record = _record(folder, key, runtime)
    path = folder / record["module"]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CacheRefused(
            f"{path}: the compiled module its record names cannot be opened ({exc.strerror}); "
            f"delete {folder / (key + '.json')} to recompile"
        ) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheRefused(f"{path}: not a regular file; delete it and {key}.json to recompile")
        _check_private(path, st)
        digest = _digest(fd, st)
        if digest != record["sha256"]:
            raise CacheRefused(
                f"{path}: sha256 {digest[:16]}… is not the {record['sha256'][:16]}… recorded when it "
                "was compiled: the compiled module was changed afterwards, refusing to run it. "
                f"Delete {path.name} and {key}.json in {folder} to recompile"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, record


def _record(folder: Path, key: str, runtime: Runtime) -> dict:
    path = folder / f"{key}.json"
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise CacheRefused(f"{path}: cannot be read ({exc.strerror})") from exc
    if not stat.S_ISREG(st.st_mode):
        raise CacheRefused(f"{path}: not a regular file; delete it to recompile")
    _check_private(path, st)
    data, more = read_capped(path, 4096)
    try:
        record = json.loads(data)
        fields = record["module"], record["sha256"], record["runtime_sha256"], record["wasmtime"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CacheRefused(f"{path}: not a module record ({exc}); delete it to recompile") from exc
    expected = (f"{key}-{record['sha256'][:16]}.cwasm", runtime.sha256, version("wasmtime"))
    if more or (fields[0], fields[2], fields[3]) != expected:
        raise CacheRefused(f"{path}: names another module, runtime or wasmtime; delete it to recompile")
    return record


def _digest(fd: int, st: os.stat_result) -> str:
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if ident not in _DIGESTS:
        h = hashlib.sha256()
        offset = 0
        while block := os.pread(fd, 1 << 20, offset):
            h.update(block)
            offset += len(block)
        _DIGESTS[ident] = h.hexdigest()
    return _DIGESTS[ident]


def _compile(folder: Path, key: str, runtime: Runtime) -> None:
    import wasmtime

    module = wasmtime.Module.from_file(runtime.engine(), str(runtime.path()))
    data = bytes(module.serialize())
    digest = hashlib.sha256(data).hexdigest()
    name = f"{key}-{digest[:16]}.cwasm"
    record = {
        "module": name,
        "sha256": digest,
        "runtime_sha256": runtime.sha256,
        "wasmtime": version("wasmtime"),
    }
    _write_atomic(folder / name, data)  # the module first: a record names only a whole module
    _write_atomic(folder / f"{key}.json", json.dumps(record, indent=1).encode())


def _write_atomic(out: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, out)  # atomic: readers see no file or a whole one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
