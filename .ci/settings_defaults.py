"""No default written into code for a setting: `cfg.get("n_boot", 2000)` keeps a second default
beside the one in the YAML, and the two drift apart (docs/development/style.md, "Settings:
one default, in the YAML").

Run: `make lint` (or `python .ci/settings_defaults.py`). Finds every `<settings>.get("key",
<literal>)` in src/retrace: a `.get` with a string key and a literal default (a number, a
string, True/False, a non-empty list, tuple or dict literal) on a settings object, that is an
expression whose chain of names, attributes or string subscripts names a settings word
(SETTINGS: cfg, config, settings, engine, sampling, ...; or ends in _cfg, _config, _settings):
`cfg["method"].get("n", 1)`, `self.engine.get("n_ctx", 4096)`, `(scorer or {}).get("name", "x")`.
`.get("key")`, `.get("key", None)` and an empty `{}`/`[]`/`()` say "absent", not a value: they pass.
The sites of the day this check came are listed in settings_defaults.txt (`path:function
key=default`, one per site); a site not listed fails, and so does a listed one that is gone
(delete its line: the list only shrinks as typed settings take the defaults over).
Exit 0 when all hold; else one line each, 1.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ALLOWED_FILE = Path(__file__).with_name("settings_defaults.txt")
SETTINGS = re.compile(
    r"^(cfg|config|settings|engine|scoring|scorer|sampling|backend|method|experiment|exp|opts|options)$"
    r"|_(cfg|config|settings)$"
)


def chain(node: ast.expr) -> list[str]:
    """The names along a receiver: `self.cfg["dm"].get("x", {})` -> [x, dm, cfg, self]."""
    out: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            out.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                out.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.BoolOp):  # (cfg.get("engine") or {}).get(...)
            node = node.values[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if node.args and isinstance(node.args[0], ast.Constant):
                out.append(str(node.args[0].value))
            node = node.func.value
        else:
            return out + ([node.id] if isinstance(node, ast.Name) else [])


def literal_default(node: ast.expr) -> bool:
    """A value written into the code: not None, not an empty container."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True  # -1, -0.5
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return bool(node.elts)
    return isinstance(node, ast.Dict) and bool(node.keys)


def is_site(node: ast.AST) -> bool:
    """A `<settings>.get("key", <literal>)` call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
        return False
    if (
        len(node.args) != 2
        or not isinstance(node.args[0], ast.Constant)
        or not isinstance(node.args[0].value, str)
    ):
        return False
    return literal_default(node.args[1]) and any(SETTINGS.search(n) for n in chain(node.func.value))


def sites(source: str, path: str) -> list[str]:
    """`path:function key=default` of every site in one file's source (`<module>` at top level)."""
    tree = ast.parse(source, path)
    owner: dict[ast.AST, str] = {}
    for fn in ast.walk(tree):  # outer functions come first: an inner one overwrites its part
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(fn):
                if inner is not fn:
                    owner[inner] = fn.name
    found = []
    for node in ast.walk(tree):
        if is_site(node):
            assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Constant)
            key, default = node.args[0].value, ast.unparse(node.args[1])
            found.append(f"{path}:{owner.get(node, '<module>')} {key}={default}")
    return found


def all_sites(src: Path = SRC) -> Counter[str]:
    out: Counter[str] = Counter()
    for path in sorted(src.rglob("*.py")):
        out.update(sites(path.read_text(), path.relative_to(src).as_posix()))
    return out


def allowed(path: Path = ALLOWED_FILE) -> Counter[str]:
    lines = path.read_text().splitlines() if path.is_file() else []
    return Counter(line for line in lines if line.strip() and not line.startswith("#"))


def problems(found: Counter[str], allow: Counter[str]) -> list[str]:
    """One line per site beyond the allow-list and per allow-list line with no site left."""
    lines = [
        f"src/{site.split(' ')[0]}: .get({site.split(' ', 1)[1].replace('=', ', ', 1)}) writes a setting's "
        "default into the code: put it in the YAML (config/) and read the key plainly"
        for site in sorted((found - allow).elements())
    ]
    lines += [
        f".ci/settings_defaults.txt: {site} is gone from the code: delete the line"
        for site in sorted((allow - found).elements())
    ]
    return lines


def main() -> int:
    found = all_sites()
    bad = problems(found, allowed())
    for line in bad:
        print(line)
    print(f"settings defaults: {sum(found.values())} sites, all on the allow-list but {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
