"""What can be run, one line each: `retrace list [experiments|models|datasets|methods|plugins]`.

Each line is the option's name and the first sentence of the comment that opens its config
file (config/<group>/<name>.yaml), so the list stays as current as the files it reads.
Datasets also say where their data comes from: bundled (ships with retrace, runs from a
clone alone), mirror (needs the benchmark mirror, retrace.config.mirror) or hub.
`plugins` (asked for by name, not in the bare list) lists every registered plugin, methods,
backends, tasks, tools and method families, with the file and line that defines it.
"""

from __future__ import annotations

import re
from pathlib import Path

from retrace.config.compose import CONFIG_DIR
from retrace.util.yamlfile import load_yaml

GROUPS = {"experiments": "experiment", "models": "model", "datasets": "dataset", "methods": "method"}
KINDS = (*GROUPS, "plugins")
WIDTH = 96  # characters of description per line
_PREFIX = re.compile(r"^Dataset config \(Hydra group `dataset`\):\s*")
# A sentence ends at ". " before a capital or a digit (not in "et al. 2023", "e.g. the").
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]`][.])(?<! al\.)\s+(?=[A-Z`0-9])")


def family_methods() -> list[tuple[str, str]]:
    """Methods of the families with stages of their own (set in an experiment's block of that
    family: `art:`, `drr:`; retrace.config.families), by block name."""
    from retrace.config.families import FAMILIES

    families = sorted((f for f in FAMILIES.all() if f.block), key=lambda f: f.block or "")
    return [(f"{f.block}: block", f"{f.summary}: {', '.join(f.methods())}") for f in families]


def plugin_entries() -> list[tuple[str, str]]:
    """(kind and name, `path:line` defining it) of every registered plugin (retrace.util.registry)."""
    from retrace.config.families import FAMILIES
    from retrace.tools import TOOLS
    from retrace.util.registry import BACKENDS, METHODS, TASKS

    return [
        (f"{r.kind} {n}", r.where(n)) for r in (METHODS, BACKENDS, TASKS, TOOLS, FAMILIES) for n in r.names()
    ]


def summary(path: Path) -> str:
    """First sentence of the file's opening comment block."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if text.startswith("Selected with"):  # the dataset files' second line says how to select it
            break
        words.append(text)
    text = _PREFIX.sub("", " ".join(w for w in words if w))
    return _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".")


def _clip(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 1].rstrip() + "…"


def entries(kind: str, config_dir: Path = CONFIG_DIR) -> list[tuple[str, str]]:
    """(name, one-line description) of every option of one kind (one of KINDS)."""
    if kind == "plugins":
        return plugin_entries()
    out = []
    for path in sorted((config_dir / GROUPS[kind]).glob("*.yaml"), key=lambda p: p.stem):
        line = summary(path)
        if kind == "datasets":
            line = f"[{(load_yaml(path) or {}).get('source', 'mirror')}] {line}"
        out.append((path.stem, line))
    if kind == "methods":
        out += family_methods()
    return [(name, _clip(line)) for name, line in out]


def render(kinds: list[str], config_dir: Path = CONFIG_DIR) -> str:
    blocks = []
    for kind in kinds:
        rows = entries(kind, config_dir)
        width = max(len(name) for name, _ in rows)
        blocks.append(f"{kind}:\n" + "\n".join(f"  {name:<{width}}  {line}" for name, line in rows))
    return "\n\n".join(blocks)
