"""Stage `data`: load one dataset from its source, subset it, write canonical problems.

python -m retrace data --dataset gsm8k --mirror ../shared/data --out results/data/gsm8k.jsonl
"""

from __future__ import annotations

from pathlib import Path

from retrace.config.compose import compose
from retrace.config.settings import dataset_settings
from retrace.planning.plan import config_slice, stage_sources
from retrace.store import data
from retrace.store.provenance import Provenance
from retrace.tasks.gold_fix import apply_fixes, fixed_golds


def run(dataset: str, mirror: str | None, out: Path, overrides: tuple[str, ...] = ()) -> int:
    cfg = compose({"dataset": dataset}, overrides)
    settings = dataset_settings(cfg["dataset"], f"config/dataset/{dataset}.yaml")
    prov = Provenance("data", config_slice("data", cfg), stage_sources("data", cfg))
    problems, sources = data.prepare(settings, mirror)
    problems = apply_fixes(settings.task, problems)  # the dataset's gold-fix table
    prov.inputs = [str(p) for p in sources]
    prov.extra["data"] = {
        "name": dataset,
        "fingerprint": data.fingerprint(problems),
        "n_problems": len(problems),
        "source": settings["source"],
    }
    if settings.get("skip_lines"):  # malformed source lines left out (tasks/commonsense.py)
        skipped = list(settings["skip_lines"])
        prov.extra["data"]["skipped"] = {"count": len(skipped), "lines": skipped}
    if fixed_golds(problems):  # golds corrected by the dataset's table (src/retrace/tasks/gold_fixes/)
        prov.extra["data"]["gold_fixes"] = fixed_golds(problems)
    data.write_problems(out, problems)
    prov.write(out)
    return len(problems)
