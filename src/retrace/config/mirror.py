"""Where the benchmark mirror is, if anywhere.

Datasets with `source: mirror` read their files from a read-only mirror directory; bundled
datasets ship with retrace and need none (so a clone alone runs the default experiment).
The mirror is, in this order:

1. the `mirror:` config key (config/config.yaml, or `snakemake --config mirror=/path`);
2. the environment variable RETRACE_MIRROR;
3. `../shared/data` beside the repository, when that folder exists;
4. none: only bundled (and hub) datasets can be read.

    from retrace.config.mirror import resolve
    path, origin = resolve(config.get("mirror"))   # ("/data/bench", "$RETRACE_MIRROR") or (None, ...)
"""

from __future__ import annotations

import os
from pathlib import Path

from retrace.config.compose import CONFIG_DIR

ENV = "RETRACE_MIRROR"
BESIDE = CONFIG_DIR.parent.parent / "shared" / "data"  # the layout of the project's own machines
HOW = (
    "set `mirror: /path/to/data` in config/config.yaml, run `snakemake --config mirror=/path/to/data` "
    f"or export {ENV}=/path/to/data"
)


class MirrorMissing(FileNotFoundError):
    """A `source: mirror` dataset is needed but no usable mirror directory was found."""


def resolve(value: str | Path | None) -> tuple[str | None, str]:
    """(mirror path or None, where it came from: the config key, the variable, the folder beside)."""
    if value not in (None, ""):
        return str(value), "the `mirror:` config key"
    if os.environ.get(ENV):
        return os.environ[ENV], f"${ENV}"
    if BESIDE.is_dir():
        return str(BESIDE), "the folder beside the repository"
    return None, "nowhere"


def require(mirror: str | Path | None, dataset: str) -> Path:
    """The mirror directory for `dataset`, or MirrorMissing with one line saying what to do."""
    if mirror in (None, ""):
        raise MirrorMissing(
            f"dataset {dataset!r} reads the benchmark mirror, and none was found (no `mirror:` key, "
            f"${ENV} unset, no {BESIDE}); {HOW}, or choose a bundled dataset (`retrace list datasets`)"
        )
    root = Path(mirror).expanduser()
    if not root.is_dir():
        raise MirrorMissing(f"dataset {dataset!r}: mirror directory {root} does not exist; {HOW}")
    return root
