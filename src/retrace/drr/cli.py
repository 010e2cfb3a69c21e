"""`python -m retrace drr <sub> …`: the DRR stages (rules call these; logic lives in stages.py).

    drr questions --dataset D --data D.jsonl [--train-data T.jsonl] --out-train Q_train.jsonl --out-eval Q_eval.jsonl
    drr distil    --dataset D --problems Q_train.jsonl --manifest M --backend B --seed S --cache C --out-traces T --out-prompts P
    drr split     --seed S --out-dir DIR TRACES...
    drr train     --variant weighted|unweighted|shuffled --split-dir DIR --seed S --out CKPT.json --ckpt-dir DIR --metrics-out TRAIN.json
    drr generate  --problems Q_eval.jsonl --manifest M --backend B --seed S --cache C --out ROWS --out-prompts P
    drr infer     --method M --generations ROWS --problems Q_eval.jsonl --out EPISODES [--checkpoint CKPT.json]
    drr sft       --seed S --train Q_train... --eval Q_eval... --out EPISODES...   (sft_lora.enabled only)
    drr leakcheck --problems Q... --scan FILE... --out LEAK.json   (fails on a leak unless drr.leak_check: report)
    drr summarise --episodes E... --train-metrics T... --questions Q... --leak L --claims-out C --section-out S --plot-out P
Every sub-command takes --experiment NAME (whose `drr:` block is merged over config/drr/defaults.yaml).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from retrace.drr import settings


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="retrace drr", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    specs: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "questions": [
            ("--dataset", {}),
            ("--data", {"type": Path}),
            ("--train-data", {"type": Path, "required": False}),
            ("--out-train", {"type": Path}),
            ("--out-eval", {"type": Path}),
        ],
        "distil": [
            ("--dataset", {}),
            ("--problems", {"type": Path}),
            ("--manifest", {"type": Path}),
            ("--backend", {}),
            ("--seed", {"type": int}),
            ("--cache", {"type": Path}),
            ("--out-traces", {"type": Path}),
            ("--out-prompts", {"type": Path}),
        ],
        "split": [
            ("--seed", {"type": int}),
            ("--out-dir", {"type": Path}),
            ("traces", {"type": Path, "nargs": "+"}),
        ],
        "train": [
            ("--variant", {"choices": ("weighted", "unweighted", "shuffled")}),
            ("--split-dir", {"type": Path}),
            ("--seed", {"type": int}),
            ("--out", {"type": Path}),
            ("--ckpt-dir", {"type": Path}),
            ("--metrics-out", {"type": Path}),
        ],
        "generate": [
            ("--problems", {"type": Path}),
            ("--manifest", {"type": Path}),
            ("--backend", {}),
            ("--seed", {"type": int}),
            ("--cache", {"type": Path}),
            ("--out", {"type": Path}),
            ("--out-prompts", {"type": Path}),
        ],
        "infer": [
            ("--method", {}),
            ("--generations", {"type": Path}),
            ("--problems", {"type": Path}),
            ("--out", {"type": Path}),
            ("--checkpoint", {"type": Path, "required": False}),
        ],
        "sft": [
            ("--seed", {"type": int}),
            ("--train", {"type": Path, "nargs": "+"}),
            ("--eval", {"type": Path, "nargs": "+"}),
            ("--out", {"type": Path, "nargs": "+"}),
        ],
        "leakcheck": [
            ("--problems", {"type": Path, "nargs": "+"}),
            ("--scan", {"type": Path, "nargs": "+"}),
            ("--out", {"type": Path}),
        ],
        "summarise": [
            ("--episodes", {"type": Path, "nargs": "+"}),
            ("--train-metrics", {"type": Path, "nargs": "+"}),
            ("--questions", {"type": Path, "nargs": "+"}),
            ("--leak", {"type": Path}),
            ("--claims-out", {"type": Path}),
            ("--section-out", {"type": Path}),
            ("--plot-out", {"type": Path}),
        ],
    }
    for name, args in specs.items():
        p = sub.add_parser(name)
        p.add_argument("--experiment", required=True, help="config/experiment/<name>.yaml with a drr: block")
        for flag, kw in args:
            if flag.startswith("--") and "required" not in kw:
                kw = {**kw, "required": True}
            p.add_argument(flag, **kw)
    return ap


def main(argv: list[str]) -> int:
    from retrace.config.compose import load_experiment

    a = _parser().parse_args(argv)
    cfg = settings.load(
        load_experiment(a.experiment).get("drr"), f"config/experiment/{a.experiment}.yaml: drr"
    )
    from retrace.drr import stages

    if a.command == "questions":
        stages.questions(cfg, a.dataset, a.data, a.train_data, a.out_train, a.out_eval)
    elif a.command == "distil":
        stages.distil(
            cfg, a.dataset, a.problems, a.manifest, a.backend, a.seed, a.cache, a.out_traces, a.out_prompts
        )
    elif a.command == "split":
        stages.split(cfg, a.traces, a.seed, a.out_dir)
    elif a.command == "train":
        stages.train(cfg, a.variant, a.split_dir, a.seed, a.out, a.ckpt_dir, a.metrics_out)
    elif a.command == "generate":
        stages.generate(cfg, a.problems, a.manifest, a.backend, a.seed, a.cache, a.out, a.out_prompts)
    elif a.command == "infer":
        from retrace.drr import episodes

        episodes.run(cfg, a.method, a.generations, a.problems, a.out, a.checkpoint)
    elif a.command == "sft":
        from retrace.drr import sft

        if len(a.eval) != len(a.out):
            raise SystemExit(f"drr sft: {len(a.eval)} --eval files but {len(a.out)} --out files")
        sft.run(cfg, a.train, a.eval, a.out, a.seed)
    elif a.command == "leakcheck":
        from retrace.drr import leakcheck

        leakcheck.run(cfg, a.problems, a.scan, a.out)
    elif a.command == "summarise":
        from retrace.drr import report

        report.summarise(
            cfg, a.episodes, a.train_metrics, a.questions, a.leak, a.claims_out, a.section_out, a.plot_out
        )
    return 0
