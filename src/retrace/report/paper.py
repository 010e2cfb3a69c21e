"""Paper vs ours: the papers' reported numbers (config/paper_numbers.yaml) beside claims.csv rows,
whether the settings match, and the per-paper summary at the top of the report.

    refs = load_paper_numbers()                       # the data file, checked
    rows = annotate_claims(claims, refs, settings)    # each claims row + "paper" + "setting"
    summary = summarise(rows, refs)                   # per paper: counts and plain-words lines

`settings` maps a score record's sha256 to our run's setting ({"model", "questions", "n",
"depth"}, see `run_setting`), so a claim's setting is read from the records of its
evidence. Units: claims.csv holds fractions (accuracy) or FS points per question; the
papers print percentages, so our deltas are shown x100 as percentage points (pp).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from retrace.config.papers import NUMBERS
from retrace.store.provenance import prov_path

VERDICTS = ("supported", "contradicted", "inconclusive")
REF_KEYS = {
    "model",
    "paper_model",
    "dataset",
    "questions",
    "n",
    "depth",
    "method",
    "baseline",
    "gain",
    "source",
}


def _expand(entry: dict, sizes: dict, where: str) -> list[dict]:
    """An entry's refs; a `table` block becomes one ref per dataset column."""
    refs = list(entry.get("refs") or [])
    table = entry.get("table")
    if table:
        for dataset, (method, baseline) in table["values"].items():
            refs.append(
                {
                    "paper_model": table["paper_model"],
                    "dataset": dataset,
                    "method": method,
                    "baseline": baseline,
                    "source": table["source"],
                }
            )
    for i, ref in enumerate(refs):
        bad = set(ref) - REF_KEYS
        if bad or "source" not in ref:
            raise ValueError(
                f"{where}: refs[{i}] has unknown key(s) {sorted(bad)} or no 'source'; "
                f"valid: {sorted(REF_KEYS)}"
            )
        ref.setdefault("questions", sizes.get(ref.get("dataset")))
        if ref.get("gain") is None and ref.get("method") is not None:
            ref["gain"] = round(ref["method"] - ref["baseline"], 2)
    return refs


def load_paper_numbers(path: Path = NUMBERS) -> dict:
    """{"papers": {key: {...}}, "claims": {claim name: {"paper", "refs", "note"}}}; a claim
    naming an unknown paper, a duplicate claim or an unknown ref key is an error naming it."""
    data = yaml.safe_load(Path(path).read_text())
    papers, sizes, claims = data["papers"], data.get("sizes") or {}, {}
    for i, entry in enumerate(data["claims"]):
        where = f"{path}: claims[{i}] ({entry.get('claim')!r})"
        if entry.get("paper") not in papers:
            raise ValueError(f"{where}: paper {entry.get('paper')!r} is not one of {sorted(papers)}")
        if entry["claim"] in claims:
            raise ValueError(f"{where}: claim listed twice")
        claims[entry["claim"]] = {
            "paper": entry["paper"],
            "note": entry.get("note", ""),
            "refs": _expand(entry, sizes, where),
        }
    return {"papers": papers, "claims": claims}


def run_setting(score_file: Path) -> dict:
    """Our setting of one score file: model, questions, and N / D from the generate record
    upstream of it (None where a record does not say)."""
    score = json.loads(Path(score_file).read_text())
    setting = {"model": score["job"]["model"], "questions": score.get("n_problems"), "n": None, "depth": None}
    record = prov_path(score_file)
    for inp in json.loads(record.read_text()).get("inputs", []) if record.exists() else []:
        if "prov" in inp and Path(inp["prov"]).exists():
            method = (json.loads(Path(inp["prov"]).read_text()).get("config") or {}).get("method") or {}
            setting["n"] = setting["n"] or method.get("n")
            setting["depth"] = setting["depth"] or method.get("depth")
    return setting


def pick_ref(refs: list[dict], model: str, dataset: str) -> dict | None:
    """The ref for this model and dataset, else for this dataset (another model: the setting
    column says so); None when the paper reported nothing for this dataset, since a number
    from another dataset beside ours would read as a comparison it is not."""
    same = [ref for ref in refs if ref.get("dataset") == dataset]
    return next((ref for ref in same if ref.get("model") == model), same[0] if same else None)


def setting_match(ref: dict, claim: dict, ours: dict) -> list[dict]:
    """One item per setting the paper states: name, ours, paper's, equal or not."""
    ours = {"questions": claim.get("n_questions"), "n": ours.get("n"), "depth": ours.get("depth")}
    items = [
        {
            "what": "model",
            "ours": claim["model"],
            "paper": ref.get("paper_model", ""),
            "same": ref.get("model") == claim["model"],
        }
    ]
    for key, label in (("questions", "questions"), ("n", "N"), ("depth", "D")):
        if ref.get(key) is not None:
            items.append(
                {"what": label, "ours": ours.get(key), "paper": ref[key], "same": ours.get(key) == ref[key]}
            )
    return items


def _ours_setting(claim: dict, settings: dict) -> dict:
    """N / D of the method side: the first evidence record that knows them."""
    for h in claim.get("evidence", []):
        s = settings.get(h)
        if s and s.get("n") is not None:
            return s
    return {}


def annotate_claims(claims: list[dict], refs: dict, settings: dict) -> list[dict]:
    """Each claims row with "paper_key", "paper" (the ref, or None), "paper_note", "setting"
    (items) and "paper_in_ci" (whether the paper's gain lies inside our 95% CI)."""
    out = []
    for c in claims:
        entry = refs["claims"].get(c["claim"], {"paper": "other", "refs": [], "note": ""})
        ref = pick_ref(entry["refs"], c["model"], c["dataset"])
        row = {
            **c,
            "paper_key": entry["paper"],
            "paper": ref,
            "paper_note": entry["note"],
            "setting": setting_match(ref, c, _ours_setting(c, settings)) if ref else [],
            "paper_in_ci": None,
        }
        if ref and ref.get("gain") is not None and c.get("ci_low") is not None:
            row["paper_in_ci"] = c["ci_low"] * 100 <= ref["gain"] <= c["ci_high"] * 100
        out.append(row)
    return out


def plain_line(c: dict) -> str:
    """One claim in plain words: verdict, effect size with CI, and what the paper reported."""
    text = f"{c['claim']} ({c['model']}, {c['dataset']}): {c['verdict']}"
    if c.get("delta") is not None:
        text += (
            f"; {c['method']} minus {c['baseline']} = {c['delta'] * 100:+.1f} pp "
            f"[{c['ci_low'] * 100:+.1f}, {c['ci_high'] * 100:+.1f}]"
        )
    if c.get("n_questions") is not None:
        text += f" over {c['n_questions']} questions"
    ref = c.get("paper")
    if ref and ref.get("gain") is not None:
        text += (
            f"; the paper reported {ref['gain']:+.1f} pp "
            f"({ref.get('paper_model', '?')}, {ref.get('dataset', '?')})"
        )
    return text + "."


def summarise(claims: list[dict], refs: dict) -> list[dict]:
    """Per paper with claims: title, verdict counts, and the plain-words line of each claim."""
    out = []
    keys = list(refs["papers"]) + sorted({c["paper_key"] for c in claims} - set(refs["papers"]))
    for key in keys:
        mine = [c for c in claims if c["paper_key"] == key]
        if not mine:
            continue
        title = refs["papers"].get(key, {}).get("title", "claims of no listed paper")
        out.append(
            {
                "key": key,
                "title": title,
                "counts": {v: sum(c["verdict"] == v for c in mine) for v in VERDICTS},
                "lines": [{"text": plain_line(c), "verdict": c["verdict"]} for c in mine],
            }
        )
    return out
