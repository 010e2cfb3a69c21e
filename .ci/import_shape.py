"""The shape of the import graph of src/retrace, derived from the code (grimp, import-linter's own
graph builder), beside the import-linter contracts of pyproject.toml.

Run: `make lint` (or `PYTHONPATH=src .venv-lint/bin/python .ci/import_shape.py`). Checks:
- no import cycle anywhere in retrace: every strongly connected set of modules is printed with
  one import of each module in it (imports inside functions count: they are imports too);
- no loop between packages either (retrace.stages -> retrace.planning -> retrace.stages through
  different modules is a loop of the layers, though no module imports itself back): every
  strongly connected set of retrace's top-level packages and modules is printed with one
  module import behind each link, inside functions too;
- every top-level package and module of retrace is in a layer of pyproject.toml's layers
  contract (import-linter's `exhaustive` says so too; this names the file to edit);
- the core never imports a method family: the families are the subpackages with a `family`
  module (the same scan retrace.config.families does, so a new family is covered without a list here),
  and no module outside a family package imports one, directly;
- the families never import each other, directly.
A package importing its own submodules (an `__init__` re-exporting them) is not a cycle.
Exit 0 when all hold; else one line per problem and exit 1.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = "retrace"
SRC = Path(__file__).resolve().parents[1] / "src" / ROOT
PYPROJECT = SRC.parents[1] / "pyproject.toml"


def edges(graph) -> dict[str, set[str]]:
    """Importer -> imported modules, without a package's imports of its own descendants and a
    descendant's of its ancestor packages (what Python's package machinery does anyway)."""
    out: dict[str, set[str]] = {}
    for module in graph.modules:
        out[module] = {
            m
            for m in graph.find_modules_directly_imported_by(module)
            if not m.startswith(module + ".") and not module.startswith(m + ".")
        }
    return out


def cycles(out: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in sorted(out):
        if root in index:
            continue
        work = [(root, iter(sorted(out[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(out.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    group.append(m)
                    if m == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def top(module: str) -> str:
    """The top-level package or module of retrace that `module` belongs to (r.a.b -> r.a)."""
    return ".".join(module.split(".")[:2])


def package_edges(out: dict[str, set[str]]) -> dict[str, dict[str, tuple[str, str]]]:
    """Top-level package -> the packages it imports, each with one module import behind it."""
    links: dict[str, dict[str, tuple[str, str]]] = {}
    for importer in sorted(out):
        for imported in sorted(out[importer]):
            a, b = top(importer), top(imported)
            if a != b and a != ROOT and b != ROOT:
                links.setdefault(a, {}).setdefault(b, (importer, imported))
    return links


def package_loops(out: dict[str, set[str]]) -> list[str]:
    """One line per loop between top-level packages, naming one module import per link; a loop
    that is no more than one cycle of modules (already named) is not named twice."""
    links = package_edges(out)
    named_cycles = [{top(m) for m in group} for group in cycles(out)]
    lines = []
    for group in cycles({p: set(links.get(p, {})) for p in {top(m) for m in out} - {ROOT}}):
        if set(group) in named_cycles:
            continue
        inside = set(group)
        named = [" -> ".join(links[p][sorted(set(links[p]) & inside)[0]]) for p in group]
        lines.append(f"import loop between {len(group)} packages {', '.join(group)}: " + "; ".join(named))
    return lines


def layered(path: Path = PYPROJECT) -> set[str]:
    """Every name in the layers of pyproject.toml's layers contracts on the retrace container."""
    contracts = tomllib.loads(path.read_text())["tool"]["importlinter"]["contracts"]
    names = set()
    for c in contracts:
        if c.get("type") == "layers" and ROOT in c.get("containers", []):
            for layer in c["layers"]:
                names |= {n.strip() for part in layer.split("|") for n in part.split(":")}
    return {f"{ROOT}.{n}" for n in names if n}


def unlayered(modules, names: set[str]) -> list[str]:
    """One line per top-level package or module of retrace in no layer of `names`."""
    tops = sorted({top(m) for m in modules} - {ROOT} - names)
    return [f"{t} is in no layer: add it to the layers contract in pyproject.toml" for t in tops]


def families() -> list[str]:
    """The method family packages: subpackages of retrace with a family.py (retrace.config.families)."""
    return sorted(f"{ROOT}.{p.parent.name}" for p in SRC.glob("*/family.py"))


def family_of(module: str, packages: list[str]) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def problems(graph, packages: list[str] | None = None, layers: set[str] | None = None) -> list[str]:
    """Every cycle of modules, every loop of packages, every top-level module in no layer
    (`layers`: default pyproject.toml's; None there means unchecked in a made-up graph's test),
    and every import of a family package from outside it (`packages`: the family packages,
    default: found by their family.py)."""
    out = edges(graph)
    lines = []
    for group in cycles(out):
        inside = set(group)
        links = [f"{m} -> {sorted(out[m] & inside)[0]}" for m in group]
        lines.append(f"import cycle of {len(group)} modules: " + "; ".join(links))
    lines += package_loops(out)
    if layers is not None:
        lines += unlayered(out, layers)
    packages = families() if packages is None else packages
    for importer in sorted(out):
        mine = family_of(importer, packages)
        for imported in sorted(out[importer]):
            theirs = family_of(imported, packages)
            if theirs and theirs != mine:
                who = "the core" if mine is None else f"family {mine}"
                lines.append(f"{importer} imports {imported}: {who} must not import family {theirs}")
    return lines


def main() -> int:
    import grimp  # the lint venv's (envs/lint.txt); the functions above take any graph

    graph = grimp.build_graph(ROOT, cache_dir=None)
    found = problems(graph, layers=layered())
    for line in found:
        print(line)
    print(f"import shape: {len(graph.modules)} modules, {len(families())} families, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
