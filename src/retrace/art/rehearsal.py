"""ART in a rehearsal (`retrace rehearse --workflow`, retrace.app.rehearse_workflow): the block on
the simulated engine, and the planted truth of its self-consistency rows;
and ART's part of a claims design (retrace.scoring.design).

    block = simulated_block(exp["art"], scale, effects)    # checked against the effects
    truths = planted_truths(rows, truths, effects, config_dir)
"""

from __future__ import annotations

from pathlib import Path

NOTE = (
    "ART: programs written by the simulated engine (art/simulated.py), their code generate and "
    "code execute steps run for real; demonstrations, library and tool outputs shape no answer"
)


def datasets(block: dict) -> set[str]:
    """The datasets ART's tasks read: kept whole, its split draws pool and test items itself."""
    from retrace.art import plan

    tasks = block.get("tasks") or {}
    return {plan.dataset_of(t, block) for t in tasks.get("library", []) + tasks.get("unseen", [])}


def simulated_block(block: dict, scale: float, effects: Path) -> dict:
    """The ART block on the simulated engine (art/simulated.py), its engine overrides dropped and
    its test items per task (`examples`) cut to round(scale * examples); the held-out pool stays
    (it is a method setting: few-shot examples, AutoCoT's clusters, cluster selection).
    Effects limited to datasets are refused: ART's claim rows pool the tasks of a group
    ("unseen tasks"), whose planted truth a per-task effect would not give."""
    from retrace.art import plan
    from retrace.backends.simulated import load_effects

    examples = block.get("examples", plan.DEFAULTS["examples"])
    keep = [o for o in block.get("overrides", ()) if not o.lstrip("+~").startswith("backend.")]
    out = {**block, "backend": "simulated", "overrides": keep, "examples": max(1, round(scale * examples))}
    labels = set(plan.METHODS) | {j.label for j in plan.jobs(plan.check(out))}
    for e in load_effects(effects):
        if e["label"] in labels and e.get("datasets"):
            raise ValueError(
                f"effects plant {e['label']!r} on datasets {e['datasets']}: ART's claim rows pool "
                "their tasks, so an ART effect applies to every task (omit datasets:)"
            )
    return out


def planted_truths(
    rows: list[dict], truths: list[float], effects: list[dict], config_dir: Path
) -> list[float]:
    """A row on self-consistency (art_sc) in its final answers: the vote over sc_k programs
    moves accuracy away from the per-sample planted one (art/simulated.vote_gain)."""
    from retrace.art import plan
    from retrace.art.simulated import vote_gain
    from retrace.backends.simulated import difficulty_settings, planted_points
    from retrace.util.yamlfile import load_yaml

    if not any("art_sc" in (r["method"], r["baseline"]) for r in rows):
        return truths  # no self-consistency row (a run without ART): nothing to re-read
    experiment = load_yaml(config_dir / "config.yaml")["experiment"]
    block = load_yaml(config_dir / "experiment" / f"{experiment}.yaml").get("art")
    if not block:
        return truths
    k = int(plan.check(block)["settings"]["sc_k"])
    engine = difficulty_settings(config_dir)

    def accuracy(row: dict, label: str) -> float:
        points = planted_points(effects, row["model"], row["dataset"], label) / 100
        return points + (vote_gain(points, k, engine) if label == "art_sc" else 0.0)

    return [
        accuracy(r, r["method"]) - accuracy(r, r["baseline"])
        if "art_sc" in (r["method"], r["baseline"])
        else t
        for r, t in zip(rows, truths)
    ]


def test_count(cfg: dict, task: str, mirror: str | None) -> int:
    """Test items a run of `task` gets (art/stages.split): `examples` capped by what the task
    has after its held-out pool, the tasks' questions read from the data where they can be
    (the split itself, library demonstration inputs left out as a run leaves them), else the
    dataset config's `questions:` (scoring.design.question_count: a clone without the data)."""
    from retrace.art import plan
    from retrace.art.stages import task_split
    from retrace.config.compose import compose
    from retrace.scoring.design import question_count
    from retrace.store.data import prepare

    name = plan.dataset_of(task, cfg)
    ds = compose({"dataset": name})["dataset"]
    total = question_count(name, mirror)
    if mirror and ds.get("source") != "hub" and Path(mirror).is_dir():
        try:
            return len(task_split(cfg, prepare({**ds, "limit": None}, mirror)[0])[1])
        except OSError:
            pass  # the mirror lacks the file: the stated count below
    if total <= cfg["pool"]:
        raise ValueError(
            f"art task {task}: {total} questions cannot give {cfg['pool']} held-out items and a test item"
        )
    return min(int(cfg["examples"]), total - int(cfg["pool"]))


def add_design(block: dict, d, mirror: str | None = None) -> None:
    """ART's cells and claim rows in a claims design (retrace.scoring.design.Design), as a run
    writes them (art/summary._claim): each model × task with the test items a run gets
    (test_count), each claim over its task group task-averaged ("macro": each task weighs
    the same, the paper's statistic) and, where the tasks' sizes differ, pooled over questions
    beside it ("<claim> (pooled)"); a label's seeds are one draw or draws as
    art.summary.one_draw says."""
    from retrace.art.plan import check
    from retrace.art.summary import CLAIMS, FEEDBACK_CLAIM, mmlu_tasks, one_draw

    cfg = check(block)
    lib, unseen = cfg["tasks"].get("library", []), cfg["tasks"].get("unseen", [])
    groups = {"library": lib, "unseen": unseen, "all": lib + unseen, "mmlu": sorted(mmlu_tasks(unseen))}
    fb = cfg.get("feedback") or {}
    methods = list(cfg["methods"]) + ([f"art@{fb['version']}"] if fb else [])
    labels = {m: (len(cfg["seeds"]), one_draw(m)) for m in methods}
    sizes = {task: test_count(cfg, task, mirror) for task in groups["all"]}
    for model in cfg["models"]:
        for task in groups["all"]:
            d.cells[(model, task)] = {"n": sizes[task], "labels": labels}
        # a group the block does not run (no MMLU subject) has no row, as in art/summary
        rows = [
            (claim, f"{group} tasks", a, b, groups[group]) for claim, a, b, group in CLAIMS if groups[group]
        ]
        if fb:
            rows.append((FEEDBACK_CLAIM, "edited tasks", methods[-1], "art", list(fb.get("tasks", []))))
        for claim, dataset, a, b, tasks in rows:
            keys = [(model, t) for t in tasks]
            if len({sizes[t] for t in tasks}) > 1:  # unequal sizes: the two statistics differ
                d.rows.append((claim, model, dataset, a, b, "greater", "acc", 1, keys, "macro"))
                claim = f"{claim} (pooled)"
            d.rows.append((claim, model, dataset, a, b, "greater", "acc", 1, keys, "pooled"))
