"""The task library: demonstration programs as plain files, in versions.

    from retrace.art.library import load_library, eval_tasks
    lib = load_library(["src/retrace/art/library/base", "src/retrace/art/library/feedback"])
    lib.tasks["word_unscrambling"].path   # the file the version uses (a later directory's wins)
    lib.tasks["word_unscrambling"].demos  # its demonstration programs (text), each a valid program
    lib.files(["word_unscrambling", "arithmetic"])   # exactly the files a prompt with those tasks reads

A version is a list of directories; a later one overrides files of the same relative path
(the paper's "human feedback" is a small directory over the base: edited demonstrations, or,
as in feedback/, an index.yaml that adds a human-written task for an unseen task).
Each directory may hold `index.yaml` ({cluster: {task: description}}; the last one wins) and
`<cluster>/<task>.txt` files of demonstrations separated by lines of `----`. Every
demonstration must parse as a complete program; an error names the file and its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from retrace.art.program import DELIMITER, ProgramError, parse
from retrace.util.yamlfile import load_yaml

LIBRARY_DIR = Path(__file__).resolve().parent / "library"
EVAL_TASKS = LIBRARY_DIR / "eval_tasks.yaml"


@dataclass(frozen=True)
class LibraryTask:
    name: str
    cluster: str
    description: str
    path: Path
    demos: tuple[str, ...]


@dataclass(frozen=True)
class Library:
    dirs: tuple[Path, ...]
    index_path: Path
    tasks: dict

    def clusters(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for t in self.tasks.values():
            out.setdefault(t.cluster, []).append(t.name)
        return out

    def files(self, names) -> list[Path]:
        return [self.tasks[n].path for n in names]


def resolve(path: str | Path) -> Path:
    """A library path from config: absolute, relative to the working directory, or to LIBRARY_DIR.

    Paths inside the working directory come back relative to it, so rerun bookkeeping and
    provenance do not change when the checkout moves."""
    p = Path(path)
    if not (p.is_absolute() or p.exists()):
        p = LIBRARY_DIR / p
    try:
        return p.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return p


def _last(dirs: list[Path], rel: str) -> Path | None:
    found = [d / rel for d in dirs if (d / rel).is_file()]
    return found[-1] if found else None


def read_demos(path: Path) -> tuple[str, ...]:
    """The demonstrations of one file; each must be a complete program (errors name file:line)."""
    text = path.read_text(encoding="utf-8")
    demos, start = [], 1
    for chunk in re.split(rf"(?m)^{re.escape(DELIMITER)}[ \t]*\n?", text):
        lead = len(chunk) - len(chunk.lstrip("\n"))
        body = chunk.strip("\n")
        if body:
            try:
                parse(body)
            except ProgramError as e:
                line = start + lead + (e.line or 1) - 1
                raise ProgramError(f"{path}:{line}: {str(e).split(': ', 1)[-1]}", None) from None
            demos.append(body)
        start += chunk.count("\n") + 1
    if not demos:
        raise ProgramError(f"{path}: no demonstration programs")
    return tuple(demos)


def load_index(dirs) -> tuple[Path, dict[str, tuple[str, str]]]:
    dirs = [resolve(d) for d in dirs]
    index_path = _last(dirs, "index.yaml")
    if index_path is None:
        raise FileNotFoundError(f"no index.yaml in library directories {[str(d) for d in dirs]}")
    raw = load_yaml(index_path) or {}
    entries = {}
    for cluster, tasks in raw.items():
        for name, desc in (tasks or {}).items():
            entries[name] = (cluster, str(desc))
    return index_path, entries


def load_library(dirs) -> Library:
    dirs = [resolve(d) for d in dirs]
    for d in dirs:
        if not d.is_dir():
            raise FileNotFoundError(f"library directory {d} does not exist")
    index_path, entries = load_index(dirs)
    tasks = {}
    for name, (cluster, desc) in entries.items():
        path = _last(dirs, f"{cluster}/{name}.txt")
        if path is None:
            raise FileNotFoundError(f"{index_path}: task {name!r} has no file {cluster}/{name}.txt")
        tasks[name] = LibraryTask(name, cluster, desc, path, read_demos(path))
    return Library(tuple(dirs), index_path, tasks)


def eval_tasks(path: Path = EVAL_TASKS) -> dict[str, dict]:
    """The evaluation tasks: name -> {dataset, description, library (library tasks only)}."""
    raw = load_yaml(path) or {}
    for name, t in raw.items():
        missing = {"dataset", "description"} - set(t or {})
        if missing:
            raise ValueError(f"{path}: task {name!r} lacks {sorted(missing)}")
    return raw
