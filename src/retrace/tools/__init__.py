"""Tool plugins for ART programs (`[code execute]`, `[search]`, `[lookup]`, …).

One file per tool; each registers itself with `@TOOLS.register("name")` and is
found by `TOOLS.get("name")`, which imports every module of this package.
"""

from __future__ import annotations

from retrace.util.registry import Registry

TOOLS = Registry("tool", "retrace.tools")
