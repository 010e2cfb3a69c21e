"""Tool plugins for ART programs (`[code execute]`, `[search]`, `[lookup]`, …).

One file per tool; each registers itself with `@TOOLS.register("name")` and is
found by `TOOLS.get("name")`, which imports every module of this package.
"""

from __future__ import annotations

from typing import Any

from retrace.util.registry import Registry, subclass_of

TOOLS: Registry[Any] = Registry("tool", "retrace.tools", subclass_of("retrace.tools._interface:Tool"))
