"""No file of the repository cites a document outside it (docs/development/style.md, "Cite what
is in the repository"): a user's clone holds only what the repository holds. Checked here:
every relative Markdown link and every `docs/….md` path named in any text file points at a file
that exists, and nothing names the stored papers or notes that lived beside the repository
(`../shared/papers/…`, a STYLE.md that is not in it). The benchmark mirror's default location
(`../shared/data`, retrace.config.mirror) is a place data is read from, not a citation."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", ".venv-lint", "results", "__pycache__", ".snakemake", ".pytest_cache"}
SUFFIXES = {".md", ".py", ".yaml", ".yml", ".smk", ".j2", ".toml", ".txt", ".sh", ".cfg", ""}
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOC = re.compile(r"(?<![\w./-])((?:\.\./)*docs/[\w./-]+\.md)\b")
OUTSIDE = re.compile(r"shared/papers|\bSTYLE\.md\b|\w+\.paper\.txt|\w+\.summary\.txt|\w+\.review\.json")


def text_files():
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if any(p in SKIP for p in parts) or parts[:3] == ("docs", "measurements", "results"):
            continue  # result files record what ran, paths of the machine included
        if path.is_file() and path.suffix in SUFFIXES and path != Path(__file__).resolve():
            try:
                yield path, path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def broken(path: Path, text: str) -> list[str]:
    """The citations in one file that point at no file of the repository."""
    targets = LINK.findall(text) if path.suffix == ".md" else []
    out = [t for t in targets if not re.match(r"^[a-z]+:", t) and not (path.parent / t).exists()]
    out += [t for t in DOC.findall(text) if not ((ROOT / t).exists() or (path.parent / t).exists())]
    return sorted(set(out + OUTSIDE.findall(text)))


def test_every_citation_points_into_the_repository():
    bad = {str(p.relative_to(ROOT)): b for p, text in text_files() if (b := broken(p, text))}
    assert bad == {}


def test_the_check_bites(tmp_path):
    doc = tmp_path / "note.md"
    doc.write_text("")
    text = (
        "See [style](docs/development/nope.md), docs/none.md and ../shared/papers/x.paper.txt; [ok](note.md)."
    )
    assert broken(doc, text) == ["docs/development/nope.md", "docs/none.md", "shared/papers", "x.paper.txt"]
