"""Write files so a crash never leaves a half-written artifact under the final name."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary sibling of `path`; rename it over `path` only if the block succeeds."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise _naming(e, path) from None
    try:
        # mkstemp makes 0600; a published artifact gets the mode open() would give it, so a
        # group sharing a run (or a web server showing the report) can read it
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):  # a full disk or quota: say which artifact was not written
            raise _naming(e, path) from None
        raise


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for a moment,
    under every thread); the set-and-restore fallback only where /proc has no Umask line."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _naming(e: OSError, path: Path) -> OSError:
    return type(e)(e.errno, f"{e.strerror or e}: {path} was not written (nothing was left under that name)")


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    with atomic_open(path) as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    """Read JSON lines; a malformed line raises ValueError naming the file and line."""
    rows = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: malformed JSON line: {e.msg}") from None
    return rows


def portable(path: str | Path) -> str:
    """`path` relative to the run's root (the working directory) when it lies inside it, else
    absolute: a run copied or moved elsewhere still finds its own files."""
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(os.getcwd()))
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def publish_once(final: Path, blob: str, tmp: Path) -> bool:
    """Publish `blob` as `final` unless it exists (the first writer wins; readers never see a
    part), writing through `tmp` beside it; whether this call published it."""
    try:  # a write cut short (ENOSPC, quota) raises here: its part is never published
        tmp.write_text(blob, encoding="utf-8")
        try:
            os.link(tmp, final)  # atomic; refuses an existing name
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: rename unless someone was first
            if final.exists():
                return False
            os.replace(tmp, final)
        return True
    finally:
        tmp.unlink(missing_ok=True)
