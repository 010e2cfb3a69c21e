"""Report sections contributed by method families (DRR, ART, …) as JSON files.

A family's stage writes one section file (with its own provenance record) and the report
renders it after the spine's tables:

    {"title": "DRR: discriminator-guided reasoning",
     "intro": "one paragraph of plain text",
     "tables": [{"caption": "...", "columns": ["method", "accuracy", ...],
                 "rows": [["drr", 0.61, ...], ...],
                 "prov": ["<sha256 of the record behind row 0>", ...]}],   # optional, per row
     "images": ["results/drr/.../loss_curve.png"],                        # optional
     "notes": ["plain-text caveats, e.g. which splits were used"]}        # optional

Images are copied next to index.html (as `<section slug>-<file name>`) so the page stays
self-contained. Unknown keys are an error naming the file, so a typo is not silently dropped.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

KEYS = {"title", "intro", "tables", "images", "notes"}
TABLE_KEYS = {"caption", "columns", "rows", "prov"}


def _check(path: Path, sec: dict) -> None:
    if not isinstance(sec, dict) or "title" not in sec:
        raise ValueError(f"{path}: a report section needs an object with a 'title'")
    if set(sec) - KEYS:
        raise ValueError(f"{path}: unknown section key(s) {sorted(set(sec) - KEYS)}; valid: {sorted(KEYS)}")
    for i, t in enumerate(sec.get("tables", [])):
        if set(t) - TABLE_KEYS or "columns" not in t or "rows" not in t:
            raise ValueError(
                f"{path}: tables[{i}] needs 'columns' and 'rows' (valid keys {sorted(TABLE_KEYS)})"
            )
        for j, r in enumerate(t["rows"]):
            if len(r) != len(t["columns"]):
                raise ValueError(
                    f"{path}: tables[{i}].rows[{j}] has {len(r)} cells for {len(t['columns'])} columns"
                )


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "section"


def load_sections(paths, out_dir: Path) -> tuple[list[dict], list[tuple[Path, Path]]]:
    """(sections ready for the template, [(image source, destination)] still to copy)."""
    sections, copies = [], []
    for path in paths:
        sec = json.loads(Path(path).read_text())
        _check(Path(path), sec)
        images = []
        for img in sec.get("images", []):
            src = Path(img)
            if not src.exists():
                raise ValueError(f"{path}: image {img} does not exist")
            dest = Path(out_dir) / f"{slug(sec['title'])}-{src.name}"
            copies.append((src, dest))
            images.append(dest.name)
        sections.append(
            {
                "title": sec["title"],
                "intro": sec.get("intro", ""),
                "tables": sec.get("tables", []),
                "images": images,
                "notes": sec.get("notes", []),
                "slug": slug(sec["title"]),
            }
        )
    return sections, copies


def copy_images(copies: list[tuple[Path, Path]]) -> list[Path]:
    for src, dest in copies:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return [dest for _, dest in copies]
