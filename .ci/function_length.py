"""No function in src/retrace longer than LIMIT lines (docs/development/style.md, "Small units").

Run: `make lint` (or `python .ci/function_length.py`). A function's length is from its `def`
(or first decorator) to its last line, docstring and comments included. What stays longer is
listed in ALLOWED with its reason; an entry whose function is short again (or gone) is an
error too, so the list cannot outlive its reasons. Exit 0 when all hold; else one line each, 1.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIMIT = 80
SRC = Path(__file__).resolve().parents[1] / "src"
# "path/relative/to/src.py:function" -> why it stays longer (none today; keep it that way)
ALLOWED: dict[str, str] = {}


def long_functions() -> dict[str, int]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > LIMIT:
                    out[f"{path.relative_to(SRC).as_posix()}:{node.name}"] = length
    return out


def main() -> int:
    found = long_functions()
    bad = {k: n for k, n in found.items() if k not in ALLOWED}
    stale = sorted(set(ALLOWED) - set(found))
    for where, n in sorted(bad.items()):
        print(
            f"src/{where}: {n} lines > {LIMIT}: split it (or list it in .ci/function_length.py, saying why)"
        )
    for where in stale:
        print(
            f".ci/function_length.py: ALLOWED names {where}, which is short now (or gone): delete the entry"
        )
    print(f"function length: {len(bad)} functions over {LIMIT} lines, {len(stale)} stale allow-list entries")
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
