"""Per-question transcripts of each run: the question, each sample, the answer extracted from
it, the gold, and whether it was right — what a reader checks before trusting an accuracy.

    items = transcript(Path("results/scores/m/llamacpp/gsm8k/seed0/majority.json"))
    hrefs = write_pages(score_files, out_dir, env)   # {score record sha256: page path}

A run's score record names its generations and data files as inputs; the page is built from
those three files (`results/report/transcripts/<model>/<backend>/<dataset>/seed<s>/<label>.html`).
A run whose generations are not on disk (a crate exported without them) gets no page. Pages
stay small on large runs: the first MAX_QUESTIONS questions, each sample's text clipped at
MAX_CHARS; the page says where the rest is.
"""

from __future__ import annotations

import json
from pathlib import Path

from retrace.store.provenance import load, run_root
from retrace.util.atomic import atomic_open

MAX_QUESTIONS = 20
MAX_CHARS = 3000
FOLDER = "transcripts"


def _inputs(score_file: Path) -> tuple[Path | None, Path | None, dict]:
    """(generations file, data file, score record) named by the score's provenance record."""
    rec = load(score_file)
    root = run_root(score_file, rec)
    paths = [root / i["path"] for i in rec.get("inputs", []) if isinstance(i, dict) and i.get("path")]
    generations = next((p for p in paths if "/generations/" in str(p) and p.suffix == ".jsonl"), None)
    data = next((p for p in paths if "/data/" in str(p) and p.suffix == ".jsonl"), None)
    return generations, data, rec


def _clip(text: str) -> tuple[str, int]:
    return (text, 0) if len(text) <= MAX_CHARS else (text[:MAX_CHARS], len(text) - MAX_CHARS)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def transcript(score_file: Path) -> dict | None:
    """The run's job, its questions with samples, answers and verdicts; None without generations."""
    generations, data, rec = _inputs(Path(score_file))
    if not (generations and data and generations.is_file() and data.is_file()):
        return None
    score = json.loads(Path(score_file).read_text())
    problems = {p["id"]: p for p in _jsonl(data)}
    # rows without a problem id (another method family's layout) have no transcript here
    samples = {g["problem_id"]: g.get("samples") or [] for g in _jsonl(generations) if "problem_id" in g}
    items = []
    for pp in score.get("per_problem", [])[:MAX_QUESTIONS]:
        if not isinstance(pp, dict) or "id" not in pp:
            continue
        problem = problems.get(pp["id"], {})
        texts = samples.get(pp["id"], [])
        rows = []
        for i, s in enumerate(texts):
            text, cut = _clip(s.get("text") or "")
            rows.append(
                {
                    "index": s.get("index", i),
                    "text": text,
                    "cut": cut,
                    "answer": _at(pp.get("answers"), i),
                    "source": _at(pp.get("sources"), i),
                    "correct": _at(pp.get("correct"), i),
                    "truncated": _at(pp.get("truncated"), i),
                }
            )
        items.append(
            {
                "id": pp["id"],
                "question": problem.get("question", ""),
                "choices": problem.get("choices"),
                "gold": problem.get("gold"),
                "vote": pp.get("vote"),
                "vote_correct": pp.get("vote_correct"),
                "samples": rows,
            }
        )
    return {
        "job": score.get("job") or {},
        "items": items,
        "n_problems": len(score.get("per_problem", [])),
        "generations": _shown(generations, run_root(score_file, rec)),
    }


def _shown(path: Path, root: Path) -> str:
    """`path` relative to the run's root where it lies inside it (as records store paths)."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _at(values, i: int):
    return values[i] if isinstance(values, list) and i < len(values) else None


def page_name(score_file: Path) -> str:
    """transcripts/<model>/<backend>/<dataset>/seed<s>/<label>.html, from the score's path."""
    parts = Path(score_file).with_suffix(".html").parts
    return "/".join((FOLDER, *parts[parts.index("scores") + 1 :])) if "scores" in parts else ""


def write_pages(rows: list[dict], out_dir: Path, env) -> tuple[list[Path], dict[str, str]]:
    """One page per result row that has its generations; ({record sha256: page path})."""
    template = env.get_template("transcript.html.j2")
    written, hrefs = [], {}
    for r in rows:
        score_file = Path(r["score_file"])
        name = page_name(score_file)
        t = transcript(score_file) if name else None
        if t is None:
            continue
        out = Path(out_dir) / name
        depth = "../" * (name.count("/"))
        with atomic_open(out) as f:
            f.write(template.render(t=t, back=f"{depth}index.html", max_questions=MAX_QUESTIONS))
        written.append(out)
        hrefs[r["prov_sha256"]] = name
    return written, hrefs
