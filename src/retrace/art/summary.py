"""ART's summary stage: score every run, then the claims CSV and the report section.

    python -m retrace art summarize --experiment smoke --out-dir results/art/summary RUN.jsonl …

Writes scores.json (per run: per-question correctness under the task's own metric, tool
use), claims.csv (rows for retrace.scoring.claims) and section.json (report/sections.py),
each with a provenance record whose inputs are the run files (whose records lead to the
library files, the data and the model).
"""

from __future__ import annotations

import json
from pathlib import Path

from retrace.art import plan
from retrace.art.metrics import grade
from retrace.art.task_average import task_averaged, task_weights
from retrace.config.compose import compose
from retrace.scoring.claims import claim_row, write_claims_csv
from retrace.store.provenance import Provenance, load, prov_path
from retrace.util.atomic import write_json
from retrace.util.hashing import sha256_file
from retrace.util.records import Problem
from retrace.util.registry import TASKS

CLAIMS = (  # (claim, method, baseline, which tasks)
    ("ART beats few-shot on unseen tasks", "art", "fewshot", "unseen"),
    ("ART beats AutoCoT", "art", "autocot", "library"),
    ("ART beats AutoCoT on unseen tasks", "art", "autocot", "unseen"),  # the paper's setting (§5)
    # §1's "over 22 percentage points" is over 32/34 BIG-bench tasks and all MMLU tasks: every
    # task run here, library and unseen (exploratory rows, direction stated before any data)
    ("ART beats AutoCoT on BIG-bench and MMLU", "art", "autocot", "all"),
    ("ART beats few-shot on library tasks", "art", "fewshot", "library"),  # §5.1: +14.9
    ("ART beats few-shot on MMLU", "art", "fewshot", "mmlu"),  # §5.2: +8.5, 5 of 6 tasks
    ("ART without tools beats AutoCoT", "art_notools", "autocot", "library"),
    ("tools help", "art", "art_notools", "all"),
    ("self-consistency helps", "art_sc", "art", "all"),
    ("pausing at tool calls beats regenerating the suffix", "art", "art_regenerate", "all"),
)
FEEDBACK_CLAIM = "a library edit helps the edited task"  # art@<version> vs art on the edited tasks
# Methods whose seeds are draws although they decode at temperature 0: few-shot samples its
# shots and AutoCoT seeds its k-means by the run seed (art/baselines.py); art_sc samples.
SEED_DRAWS = ("fewshot", "autocot", "art_sc")


def one_draw(label: str) -> bool:
    """Whether an ART label's seeds are one draw by design (scoring.claims `deterministic`): a
    temperature-0 program method (art, art_notools, art_regenerate, art@<version>) chooses
    nothing by seed, so its seed 0 counts, once; the SEED_DRAWS labels' seeds all count."""
    return label not in SEED_DRAWS


def _traces(row: dict) -> list[dict]:
    return row.get("traces") or ([row["trace"]] if row.get("trace") else [])


def score_run(path: Path, problems: dict[str, Problem], task) -> dict:
    rec = load(path)
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    correct: dict = {}
    calls: dict = {}
    tool_rows, searches = 0, [0, 0]
    for r in rows:
        ok, _ = grade(task, problems[r["id"]], r["answer"])
        correct[r["id"]] = 1.0 if ok else 0.0
        used = False
        for t in _traces(r):
            for c in t.get("tool_calls", []):
                used = True
                n, f = calls.get(c["tool"], (0, 0))
                calls[c["tool"]] = (n + 1, f + (0 if c["ok"] else 1))
                if c["tool"] == "search":  # found: the call's own flag (older traces: ok)
                    searches[0] += 1
                    searches[1] += bool((c.get("meta") or {}).get("found", c["ok"]))
        tool_rows += used
    search = (rec.get("tools") or {}).get("search")  # the run's search backend and corpus
    return {
        "path": str(path),
        "prov_sha256": sha256_file(prov_path(path)),
        **rec["job"],
        "engine": ran_name(rec.get("engine")),  # what ran, from the run's record
        "library": rec.get("library", {}),
        "correct": correct,
        "accuracy": sum(correct.values()) / max(1, len(correct)),
        "tool_use_rate": tool_rows / max(1, len(rows)),
        "tool_calls": calls,
        "search": {**search, "calls": searches[0], "found": searches[1]} if search else None,
    }


def _problems(cfg: dict, task: str, data_dir: Path) -> tuple[dict, object]:
    ds = compose({"dataset": plan.dataset_of(task, cfg)})["dataset"]
    from retrace.store import data

    probs = data.read_problems(Path(data_dir) / f"{ds['name']}.jsonl")
    return {p.id: p for p in probs}, TASKS.get(ds["task"])


def _pooled(scores: list[dict], label: str, tasks: set[str]) -> tuple[list[dict], list[str]]:
    """Per seed, one {task/question: score} over the tasks (questions of all tasks pooled)."""
    by_seed: dict[int, dict] = {}
    ev = []
    for s in scores:
        if s["label"] == label and s["task"] in tasks:
            by_seed.setdefault(s["seed"], {}).update({f"{s['task']}:{q}": v for q, v in s["correct"].items()})
            ev.append(s["prov_sha256"])
    return [by_seed[k] for k in sorted(by_seed)], ev


def mmlu_tasks(tasks) -> set[str]:
    """The MMLU subjects among `tasks` (their names start mmlu_, config/dataset/mmlu_*.yaml)."""
    return {t for t in tasks if t.startswith("mmlu_")}


def claims(cfg: dict, scores: list[dict], near_duplicates: dict[str, str] | None = None) -> list[dict]:
    """Claims rows; `near_duplicates` ({unseen task: library task}, art/unseen.py) are named in
    the note of every claim whose tasks include them."""
    lib, unseen = set(cfg["tasks"].get("library", [])), set(cfg["tasks"].get("unseen", []))
    groups = {"library": lib, "unseen": unseen, "all": lib | unseen, "mmlu": mmlu_tasks(unseen)}
    rows = []
    for model in cfg["models"]:
        mine = [s for s in scores if s["model"] == model]
        for claim, a, b, group in CLAIMS:
            for row in _claim(claim, model, mine, a, b, groups[group], f"{group} tasks"):
                dup = sorted((t, lib) for t, lib in (near_duplicates or {}).items() if t in groups[group])
                caveat = "; ".join(f"unseen task {t} near-duplicates library task {x}" for t, x in dup)
                row["note"] = "; ".join(filter(None, [row.get("note"), caveat]))
                rows.append(row)
        fb = cfg.get("feedback") or {}
        if fb:
            rows += _claim(
                FEEDBACK_CLAIM,
                model,
                mine,
                f"art@{fb['version']}",
                "art",
                set(fb.get("tasks", [])),
                "edited tasks",
            )
    return rows


def _claim(claim, model, scores, a, b, tasks, dataset) -> list[dict]:
    """The claim task-averaged (the paper's statistic, §1: "average improvement ... across
    tasks") and, beside it, pooled over questions as "<claim> (pooled)"; where every task has
    as many questions the two are the same, and one row is written."""
    ra, ea = _pooled(scores, a, tasks)
    rb, eb = _pooled(scores, b, tasks)
    if not ra or not rb:
        return []
    w = task_weights(ra + rb)
    det = (one_draw(a), one_draw(b))
    rows = [claim_row(claim, model, dataset, a, b, ra, rb, evidence=ea + eb, deterministic=det)]
    if set(w.values()) != {1.0}:  # tasks of unequal size: the two statistics differ
        rows[0]["claim"] = f"{claim} (pooled)"
        macro = claim_row(
            claim,
            model,
            dataset,
            a,
            b,
            task_averaged(ra, w),
            task_averaged(rb, w),
            evidence=ea + eb,
            deterministic=det,
            score_range=max(w.values()),  # a weighted score spans 0..w: the CI in its units
        )
        macro["note"] = "; ".join(
            filter(None, [macro.get("note"), "task-averaged (each task weighs the same)"])
        )
        rows.insert(0, macro)
    caveat = stand_in_note([s for s in scores if s["label"] in (a, b) and s["task"] in tasks])
    for row in rows:
        row["note"] = "; ".join(filter(None, [row.get("note"), caveat]))
    return rows


def ran_name(engine) -> str:
    """The engine name a run's record gives (its backend config, art/stages.py), "unknown"
    for a record without one."""
    name = engine.get("name") if isinstance(engine, dict) else engine
    return str(name or "unknown")


def ran_engine(row: dict, scores: list[dict]) -> str:
    """claims.csv `engine` of an ART row: the engines its runs' records name (score_run),
    "simulated" when any was."""
    sides = (row["method"], row["baseline"])
    ran = {s.get("engine", "unknown") for s in scores if s["model"] == row["model"] and s["label"] in sides}
    return "simulated" if "simulated" in ran else "+".join(sorted(ran)) or "unknown"


def stand_in_note(scores: list[dict]) -> str:
    """The caveat of a result that rests on the shipped stand-in search corpus ("" if none)."""
    used = [s["search"] for s in scores if s.get("search") and s["search"]["calls"]]
    stand_in = [x for x in used if x.get("stand_in")]
    if not stand_in:
        return ""
    calls, found = sum(x["calls"] for x in stand_in), sum(x["found"] for x in stand_in)
    return (
        f"search: stand-in corpus {stand_in[0]['collection']} (not the paper's web search), "
        f"{found}/{calls} calls found a passage"
    )


SIMULATED_NOTE = (
    "SIMULATED (retrace rehearse): every program, answer and code-generation reply was written by the "
    "simulated engine (art/simulated.py) with planted correctness, no model ran; the tools ran for real."
)


def _accuracy_table(cfg: dict, scores: list[dict]) -> dict:
    """Accuracy per task and method: a row per model and task, a column per label."""
    labels = list(dict.fromkeys(s["label"] for s in scores))
    tasks = list(dict.fromkeys(s["task"] for s in scores))
    acc_rows, acc_prov = [], []
    for model in cfg["models"]:
        for task in tasks:
            cells = {s["label"]: s for s in scores if s["model"] == model and s["task"] == task}
            kind = "library" if task in cfg["tasks"].get("library", []) else "unseen"
            acc_rows.append(
                [model, task, kind] + [_fmt(cells[l]["accuracy"]) if l in cells else "" for l in labels]
            )
            acc_prov.append(next(iter(cells.values()))["prov_sha256"] if cells else "")
    return {
        "caption": "Accuracy per task and method",
        "columns": ["model", "task", "kind"] + labels,
        "rows": acc_rows,
        "prov": acc_prov,
    }


def _tool_tables(scores: list[dict]) -> tuple[dict, dict]:
    """Tool use per ART run, and tool failures per label and tool."""
    tool_rows: list[list] = []
    tool_prov: list = []
    fail: dict = {}
    for s in scores:
        if s["label"].startswith("art"):
            tool_rows.append(
                [
                    s["model"],
                    s["task"],
                    s["label"],
                    _fmt(s["tool_use_rate"]),
                    sum(n for n, _ in s["tool_calls"].values()),
                ]
            )
            tool_prov.append(s["prov_sha256"])
            for tool, (n, f) in s["tool_calls"].items():
                a, b = fail.get((s["label"], tool), (0, 0))
                fail[(s["label"], tool)] = (a + n, b + f)
    fail_rows = [
        [label, tool, n, f, _fmt(f / n if n else 0.0)] for (label, tool), (n, f) in sorted(fail.items())
    ]
    fail_prov = [
        ";".join(s["prov_sha256"] for s in scores if s["label"] == label and tool in s["tool_calls"])
        for (label, tool) in sorted(fail)
    ]
    use = {
        "caption": "Tool use per run (share of items whose program called a tool)",
        "columns": ["model", "task", "label", "tool use rate", "tool calls"],
        "rows": tool_rows,
        "prov": tool_prov,
    }
    failures = {
        "caption": "Tool failures",
        "columns": ["label", "tool", "calls", "failed", "failure rate"],
        "rows": fail_rows,
        "prov": fail_prov,
    }
    return use, failures


def _version_table(scores: list[dict]) -> dict:
    """The library version (and files) each ART run read, beside its accuracy."""
    ver_rows, ver_prov = [], []
    for s in scores:
        if s["label"].startswith("art") and s.get("library"):
            lib = s["library"]
            ver_rows.append(
                [
                    s["model"],
                    s["task"],
                    s["label"],
                    lib.get("version", ""),
                    ", ".join(lib.get("tasks", [])),
                    "; ".join(_short(f) for f in lib.get("files", [])),
                    _fmt(s["accuracy"]),
                ]
            )
            ver_prov.append(s["prov_sha256"])
    return {
        "caption": "Library versions side by side (files each ART run read, sha256 prefix)",
        "columns": ["model", "task", "label", "version", "library tasks", "files", "accuracy"],
        "rows": ver_rows,
        "prov": ver_prov,
    }


def section(cfg: dict, scores: list[dict]) -> dict:
    """The ART report section (report/sections.py's form) over the runs' score records."""
    use, failures = _tool_tables(scores)
    return {
        "title": "ART: programs with tool calls (task library, pause and resume)",
        "intro": "Accuracy under each task's own metric (BIG-bench exact string match or multiple-choice "
        "grade, MMLU accuracy) on the held-out test items of each task, per method; tool-use "
        "and tool-failure rates; and the library version each ART run read.",
        "tables": [
            _accuracy_table(cfg, scores),
            use,
            tool_table(scores),
            failures,
            _version_table(scores),
            search_table(scores),
        ],
        "notes": [
            *([SIMULATED_NOTE] if cfg.get("backend") == "simulated" else []),
            *([stand_in_warning(scores)] if stand_in_warning(scores) else []),
            "Small samples: with fewer than 10 questions a claim is inconclusive by design.",
            "Multiple choice is graded on the generated answer (it must name exactly one option), "
            "not by log-likelihood ranking as in BIG-bench; never by substring.",
        ],
    }


def search_table(scores: list[dict]) -> dict:
    """Per ART run that called search: its backend, corpus (fingerprint) and hit rate."""
    rows, prov = [], []
    for s in scores:
        x = s.get("search")
        if s["label"].startswith("art") and x and x["calls"]:
            corpus = f"{x['collection']} (stand-in)" if x.get("stand_in") else x["collection"]
            hit = _fmt(x["found"] / x["calls"])
            rows.append(
                [s["model"], s["task"], s["label"], x["backend"], corpus, x["version"], x["calls"], hit]
            )
            prov.append(s["prov_sha256"])
    return {
        "caption": "Search per run: backend, corpus and hit rate (share of calls that found a passage)",
        "columns": ["model", "task", "label", "backend", "corpus", "version", "calls", "hit rate"],
        "rows": rows,
        "prov": prov,
    }


def stand_in_warning(scores: list[dict]) -> str:
    note = stand_in_note([s for s in scores if s["label"].startswith("art")])
    if not note:
        return ""
    return (
        f"Search ran on the shipped stand-in ({note}): 48 hand-written passages mirroring the "
        "library's demonstrations, not web search as in the paper. Results that rest on search "
        "(tools help, ART vs baselines) say so in their claim note; set tools.search.collection "
        "or a web backend for a paper-scale run."
    )


def tool_table(scores: list[dict]) -> dict:
    """Calls and failures per tool over every ART run, one row per registered tool (a tool
    no program called shows 0: "a library edit helps" means little if its tool never ran)."""
    from retrace.tools import TOOLS

    rows, prov = [], []
    for tool in sorted(TOOLS.names()):
        used = [s for s in scores if s["label"].startswith("art") and tool in s["tool_calls"]]
        n = sum(s["tool_calls"][tool][0] for s in used)
        f = sum(s["tool_calls"][tool][1] for s in used)
        rows.append([tool, n, f, _fmt(f / n) if n else "", len(used)])
        prov.append(";".join(s["prov_sha256"] for s in used))
    return {
        "caption": "Calls per tool over all ART runs (every tool, zero included)",
        "columns": ["tool", "calls", "failed", "failure rate", "runs calling it"],
        "rows": rows,
        "prov": prov,
    }


def _fmt(x: float) -> float:
    return round(float(x), 4)


def _short(path: str) -> str:
    p = Path(path)
    return f"{p.parent.parent.name}/{p.parent.name}/{p.name}@{sha256_file(p)[:8]}"


def run(experiment: str, runs: list[Path], data_dir: Path, out_dir: Path, leak: Path | None = None) -> None:
    from retrace.art.stages import art_config

    summarize(art_config(experiment), runs, data_dir, out_dir, {"experiment": experiment}, leak)


def unseen_table(leak: Path) -> dict:
    """The unseen-task check (art/unseen.py): each unseen task's nearest library task."""
    from retrace.art.unseen import DESCRIPTION, INPUTS

    result = json.loads(Path(leak).read_text()).get("unseen") or {}
    rows = [
        [
            t,
            r["nearest"],
            r["description"],
            r["inputs"],
            "near-duplicate" if r["near_duplicate"] else "unseen",
        ]
        for t, r in sorted((result.get("tasks") or {}).items())
    ]
    return {
        "caption": "Unseen tasks against the task library: nearest library task by description and input "
        f"format (cosine; near-duplicate at >= {DESCRIPTION} or >= {INPUTS}, art/unseen.py)",
        "columns": ["unseen task", "nearest library task", "description", "inputs", "verdict"],
        "rows": rows,
        "prov": [sha256_file(prov_path(leak))] * len(rows),
    }


def leak_table(leak: Path) -> dict:
    from retrace.art.overlap import summary_rows

    result = json.loads(Path(leak).read_text())
    return {
        "caption": "Demonstration leak check: library demonstration inputs among the test and held-out "
        "items the runs used (art/overlap.py; splits leave such items out)",
        "columns": ["verdict", "runs checked", "library inputs", "overlaps used", "left out of the splits"],
        "rows": summary_rows(result),
        "prov": [sha256_file(prov_path(leak))],
    }


def summarize(
    cfg: dict, runs: list[Path], data_dir: Path, out_dir: Path, about: dict, leak: Path | None = None
) -> dict:
    out_dir = Path(out_dir)
    cache: dict = {}
    scores = []
    for path in runs:
        task = load(path)["job"]["task"]
        if task not in cache:
            cache[task] = _problems(cfg, task, data_dir)
        scores.append(score_run(path, *cache[task]))
    code = [
        str(plan.SRC / f)
        for f in (
            "art/summary.py",
            "art/metrics.py",
            "art/plan.py",
            "art/unseen.py",
            "scoring/claims.py",
            "scoring/seeds.py",
            "scoring/stats.py",
            "scoring/verdicts.py",
        )
    ]
    inputs = [str(p) for p in runs] + ([str(leak)] if leak else [])
    paths = {
        "scores": out_dir / "scores.json",
        "claims": out_dir / "claims.csv",
        "section": out_dir / "section.json",
    }
    write_json(paths["scores"], scores)
    Provenance("art_scores", about, code, inputs=inputs).write(paths["scores"])
    from retrace.art.unseen import near_duplicates

    dups = near_duplicates(json.loads(Path(leak).read_text()).get("unseen") or {}) if leak else {}
    rows = claims(cfg, scores, dups)
    for row in rows:  # from the runs' records ("simulated" in a rehearsal), not the configured backend
        row["engine"] = ran_engine(row, scores)
    write_claims_csv(rows, paths["claims"])
    Provenance("art_claims", about, code, inputs=inputs).write(paths["claims"])
    sec = section(cfg, scores)
    if leak:
        sec["tables"] += [leak_table(leak), unseen_table(leak)]
    write_json(paths["section"], sec)
    Provenance("art_section", about, code, inputs=inputs).write(paths["section"])
    return paths


# The summary's code: the closure of `run` (retrace.planning.closure). Here, not in art/plan.py's
# ENTRIES: every ART stage imports art.plan, so a name there would put this module and the
# statistics it uses (scoring/claims.py, scoring/stats.py) into every ART job's rerun key.
ENTRY = ("retrace.art.summary:run",)


def summary_key(cfg: dict) -> str:
    """Rerun key of the summary stage: the block's tasks, feedback and models, and its code."""
    from retrace.planning.closure import code_files
    from retrace.util.hashing import hash_sources, sha256_json

    files = code_files(ENTRY)
    return sha256_json(
        {
            "tasks": cfg["tasks"],
            "feedback": cfg.get("feedback"),
            "models": cfg["models"],
            "code": hash_sources(files),
        }
    )
