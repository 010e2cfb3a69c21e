"""Read a YAML file once per content: planning the workflow reads the same small files
(the ART library's index and evaluation tasks, config groups) hundreds of times, because
Snakemake calls the input and params functions per job; parsing them each time with the
pure-Python loader cost ~2 s of a ~4 s no-op rerun (issue 14: a no-op rerun in <= 3 s).

    from retrace.util.yamlfile import load_yaml
    raw = load_yaml(path)      # a fresh copy: the caller may change it

Cached by resolved path, modification time and size, so an edited file is read again.
Parses with libyaml's safe loader where PyYAML was built with it (same results as
yaml.safe_load; errors still carry the line and column).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlSyntaxError(yaml.YAMLError, ValueError):
    """A file that is not valid YAML; the message names the file, line and column."""


def load_yaml(path: str | Path):
    """The parsed content of the YAML file at `path` (None for an empty file)."""
    p = Path(path).resolve()
    st = p.stat()
    return copy.deepcopy(_parsed(str(p), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=256)
def _parsed(path: str, mtime_ns: int, size: int):
    try:
        return yaml.load(Path(path).read_text(), Loader=_LOADER)
    except yaml.YAMLError as e:  # PyYAML's message names no file; say which, at which line
        mark = getattr(e, "problem_mark", None)
        at = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise YamlSyntaxError(f"{path}{at}: YAML syntax error: {what}") from None
