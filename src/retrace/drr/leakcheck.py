"""Stage `drr leakcheck`: scan every stored prompt and DM row for the gold answer.

    python -m retrace drr leakcheck --problems Q.jsonl ... --scan prompts.jsonl train.jsonl ... --out leak.json
    retrace plan --check --experiment drr_paper    # rehearse(): the same check before any run


Uses drr/leak.py and leak_text.py (what counts as a leak, and what it cannot catch, is documented
there). Choices are numbered from 0 in every DRR prompt, so index statements ("Answer: 2")
are checked with index base 0. Verdict: pass / fail / incomplete (a record whose question
is unknown). With `drr.leak_check: fail` (the default) a verdict other than pass fails the
job after logging the findings, so no claims are written from a leaking run (drr summarise
needs this job's output, and refuses a non-pass verdict itself too); `leak_check: report`
writes the verdict and lets the run go on (the report shows it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from retrace.drr import leak, leak_text, settings
from retrace.store import data
from retrace.util.atomic import write_json
from retrace.util.records import Problem

MODES = ("fail", "report")


def refuse(result: Mapping, mode: str, where: str) -> None:
    """SystemExit naming the findings when the verdict is not pass and mode is "fail"."""
    if mode not in MODES:
        raise ValueError(f"drr.leak_check: {mode!r} ({' | '.join(MODES)})")
    if mode == "fail" and result["verdict"] != "pass":
        shown = "\n".join(
            f"  {f['file']}:{f['line']} {f['field']} {f['kind']}: {f['excerpt']!r}"
            for f in result["findings"][:20]
        )
        raise SystemExit(
            f"gold leak check: {result['verdict']} ({result['n_findings']} findings, "
            f"{result['n_unchecked']} unchecked records) in {where}; no claims are "
            f"written from this run (set drr.leak_check: report to only report)\n{shown}"
        )


def run(cfg: Mapping, problem_files: list[Path], scan_files: list[Path], out: Path) -> dict:
    problems = [p for f in problem_files for p in data.read_problems(f)]
    result = leak.scan_files(scan_files, problems)
    result["files"] = [str(f) for f in scan_files]
    result["mode"] = cfg["leak_check"]
    refuse(result, cfg["leak_check"], ", ".join(map(str, scan_files)))
    write_json(out, result)
    settings.provenance(
        "leakcheck", cfg, list(problem_files) + list(scan_files), verdict=result["verdict"]
    ).write(out)
    return result


def rehearsal_records(problem: Problem, strategy: str, turns: int = 3) -> list[dict]:
    """The prompts and DM rows a run stores for `problem`, built without a model: the reasoner
    is taken to answer the first wrong choice on every turn (the rejected path the re-prompts
    echo), its Self-Critic replies name that choice, and the DM rows of a distillation trace
    that ends on the gold carry their DM input text (`text`) as the DM reads it."""
    from retrace.drr import prompts, stages
    from retrace.drr.dm_data import dm_input_text, rows_from_trace
    from retrace.util.templates import render

    choices = list(problem.choices or ())
    letter = leak_text.gold_letter(problem)
    gold = leak_text.LETTERS.index(letter) if letter else None
    wrong = next((k for k in range(len(choices)) if k != gold), 0)
    reply = {
        "answer": str(wrong),
        "rationale": f"{choices[wrong] if choices else ''} fits the question best.",
    }
    path: list[dict] = []
    for t in range(turns):
        msgs = prompts.turn_messages(problem, path, t, strategy)
        path.append({"turn": t, "messages": [{"role": m.role, "content": m.content} for m in msgs], **reply})
    records = stages.prompt_records(problem.id, path)
    records.append(
        {"problem_id": problem.id, "turn": "abstain", "messages": _plain(prompts.abstain_messages(problem))}
    )
    replies = [f"{reply['rationale']} ({wrong})"] * 2
    records += [
        {
            "problem_id": problem.id,
            "turn": f"selfcritic{k}",
            "messages": _plain(prompts.selfcritic_messages(problem, replies[:k])),
        }
        for k in range(3)
    ]
    attempts = [{**reply, "verdict": "reject"}] * (turns - 1)
    attempts.append({"answer": str(gold), "rationale": "It fits.", "verdict": "accept"})
    trace = {"id": problem.id, "question": prompts.question_text(problem), "attempts": attempts}
    instruction = render("drr/dm_instruction.j2")
    records += [{**r, "text": dm_input_text(r, instruction, strategy)} for r in rows_from_trace(trace)]
    return records


def _plain(messages) -> list[dict]:
    return [{"role": m.role, "content": m.content} for m in messages]


def rehearse(cfg: Mapping, mirror: str | Path | None) -> list[dict]:
    """The leak check over the evaluation prompts a run of this DRR block would store, built
    from the datasets themselves (rehearsal_records): one {"dataset", "questions", "records",
    "findings", "excerpt"} per evaluation set. Run by `retrace plan --check`."""
    from retrace.config.compose import compose
    from retrace.drr import stages

    out: list[dict] = []
    for entry in settings.entries(dict(cfg)):
        try:
            problems, _ = data.prepare(compose({"dataset": entry["name"]})["dataset"], mirror)
        except OSError as e:  # no mirror here: say so, as the spine's checks do
            out.append({"dataset": entry["name"], "skipped": str(e)})
            continue
        if not entry["train"]:
            problems = stages.split_questions(
                problems, float(cfg["train_fraction"]), int(cfg["split_seed"]), entry["name"]
            )[1]
        records = [r for p in problems for r in rehearsal_records(p, cfg["strategy"])]
        result = leak.scan_records(records, {p.id: p for p in problems}, f"{entry['name']} (rehearsal)")
        first = result["findings"][0] if result["findings"] else None
        out.append(
            {
                "dataset": entry["name"],
                "questions": len(problems),
                "records": result["n_records"],
                "findings": len(result["findings"]),
                "excerpt": f"{first.problem_id} {first.field} {first.kind}: {first.excerpt!r}"
                if first
                else "",
            }
        )
    return out
