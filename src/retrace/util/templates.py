"""Prompt templates: Jinja2 files in `retrace/prompts/`, rendered with strict variables.

    from retrace.util.templates import render
    text = render("math_cot.j2", question="What is 2+3?", choices=None)

Templates are files (never string defaults in code) so a prompt change is a visible
diff and its hash can enter provenance via `template_path(name)`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


@lru_cache(maxsize=1)
def _env():
    import jinja2  # deferred: registry discovery should not pay for it

    # StrictUndefined: a misspelt variable must fail loudly, not render as "".
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def template_path(name: str) -> Path:
    """The file behind template `name` (e.g. "math_cot.j2"); raises if there is none."""
    path = PROMPTS_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in PROMPTS_DIR.glob("*.j2")))
        raise FileNotFoundError(f"no prompt template {name!r} in {PROMPTS_DIR}; known: {known}")
    return path


def render(template_name: str, **variables) -> str:
    """Render template `template_name` with `variables`; surrounding whitespace is stripped."""
    template_path(template_name)
    return _env().get_template(template_name).render(**variables).strip()
