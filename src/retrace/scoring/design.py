"""An experiment's claims design, and per-question outcomes simulated on it.

    from retrace.scoring.design import design, simulate_rows
    d = design("paper")                       # cells, labels, seeds, claim rows, from the files
    rows = simulate_rows(d, rng, (0.5, 1.0))  # one null experiment's claims rows (unadjusted)
    rows = simulate_rows(d, rng, (0.4, 2.0), planted={("refine", "math500"): 0.10})
    verdicts = d.adjust(rows)                 # Holm over the experiment's families

The design is read from the experiment, never listed by hand: `plan.jobs` gives each
(model, dataset) cell's method labels and seeds; which seeds count is decided as the claims
stage decides it, from the config (scoring.run_facts.deterministic_by_design: a temperature-0
label is one draw, its seed 0 counted once), `claims.weaker` names the weaker-model pairs,
and question counts are the dataset configs' own (`questions:`, cut by `limit`), checked
against the mirror where one is readable (`question_count`): a clone without the data
plans the same design. Each method family adds its own cells and rows (retrace.config.families
`claims_design`): DRR's from retrace.drr.claims.claim_list over its settings
(evaluation questions: the eval file, or 1 - train_fraction of one file), per dataset and
pooled over them (dataset "all", Table 1's Overall); a DRR seed re-draws the reasoner's
samples, the DM's initialisation and its data split, so every DRR label's seeds are draws.
ART's rows are those art/summary.py writes (retrace.art.rehearsal.add_design): each claim of
art.summary.CLAIMS task-averaged over its task group (kind "macro": task-weighted scores) and,
where the tasks' sizes differ, pooled beside it ("<claim> (pooled)"), each task at the test
items a run gets after its held-out pool; its seed structure is art.summary.one_draw's: the
temperature-0 program methods are one draw, few-shot (shots sampled by seed), AutoCoT
(k-means seeded by seed) and self-consistency are draws per seed.

Simulated outcomes: every cell draws per-question success probabilities from a Beta with
mean `accuracy` and concentration `conc` (small: many questions near 0 or 1); every method
of the cell shares them (the null: equal accuracy per question, hence correlated methods),
or, with an interaction strength s (a setting's third entry), mixes them with draws of its
own, (1 - s) p + s p' (equal average accuracy, different questions solved: s = 1 shares no
difficulty between methods); a planted (label, dataset) effect raises p to p + c (1 - p), c
set so the mean rises by exactly the effect. DRR outcomes are correct / abstained / wrong (a
fifth of the misses abstain), scored as accuracy, FS(k) = correct - k wrong, and Acc(D) =
correct or abstained.
Used by benchmarks/claims_calibration.py and `retrace rehearse` (its power statement).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from retrace.scoring.claims import PAPER_CLAIMS, Primary, adjust, compare_matrices
from retrace.scoring.seeds import counted_seeds
from retrace.scoring.verdicts import test_of


@dataclass
class Design:
    name: str
    # (model, dataset) -> {"n": questions, "drr": 3-state outcomes?, "labels": {label: (seeds, det)}}
    cells: dict = field(default_factory=dict)
    # (claim, model, dataset, method, baseline, direction, metric, k, [cell keys], kind)
    rows: list = field(default_factory=list)
    # the experiment's pre-registered primary claims (claims.primary); None: one family
    primary: Primary | None = None
    # claim -> its margin, for the rows tested as not_below / not_above (scoring.verdicts.test_of)
    margins: dict = field(default_factory=dict)

    def adjust(self, rows: list[dict]) -> list[dict]:
        """Holm over the experiment's families (scoring.claims.adjust), as its claims stage does."""
        return adjust(rows, primary=self.primary)

    @property
    def n_rows(self) -> int:
        return len(self.rows)


def default_mirror() -> str:
    """The mirror as the workflow would find it (retrace.config.mirror.resolve), "" where none is."""
    from retrace.config.compose import CONFIG_DIR
    from retrace.config.mirror import resolve
    from retrace.util.yamlfile import load_yaml

    mirror = load_yaml(CONFIG_DIR / "config.yaml").get("mirror")
    if mirror:  # relative to the repository, where Snakemake runs
        return str((CONFIG_DIR.parent / mirror).resolve())
    return resolve(None)[0] or ""


def mirror_count(cfg: dict, mirror: str | None) -> int | None:
    """Questions the dataset's source yields before `limit`, read from the data; None when
    they cannot be read here (no mirror, or it lacks the file: planning goes on without)."""
    from pathlib import Path

    from retrace.store.data import prepare

    if cfg.get("source") == "hub" or (
        cfg.get("source") == "mirror" and not (mirror and Path(mirror).is_dir())
    ):
        return None
    try:
        return len(prepare({**cfg, "limit": None}, mirror)[0])
    except (OSError, ValueError):
        return None


def question_count(dataset: str, mirror: str | None) -> int:
    """Questions the dataset config yields: its `limit`, else its stated `questions:`; the
    statement is checked against the data where they can be read (a mismatch is one line)."""
    from retrace.config.compose import compose

    cfg = compose({"dataset": dataset})["dataset"]
    where = f"config/dataset/{dataset}.yaml"
    stated, found = cfg.get("questions"), mirror_count(cfg, mirror)
    if stated is not None and found is not None and int(stated) != found:
        raise ValueError(f"{where}: questions: {stated}, but the data in {mirror} yield {found}; correct one")
    total = stated if stated is not None else found
    if total is None:
        raise ValueError(f"{where}: no `questions:` count, and no data to count them in (mirror: {mirror!r})")
    return min(int(cfg["limit"]), int(total)) if cfg.get("limit") else int(total)


def _count(dataset: str, mirror: str) -> int:
    return question_count(dataset, mirror)


def _deterministic(cfg: dict) -> bool:
    from retrace.scoring.run_facts import deterministic_by_design

    return deterministic_by_design(cfg)


def spine_design(name: str, mirror: str, d: Design) -> None:
    """The spine's cells (plan.jobs) and its PAPER_CLAIMS and weaker-model rows."""
    from retrace.config.compose import load_experiment
    from retrace.planning.plan import jobs
    from retrace.scoring.preregistered import primary_family, weaker_pairs

    d.primary = primary_family(load_experiment(name), name)
    for job in jobs({"experiment": name}):
        cell = d.cells.setdefault((job.model, job.dataset), {"n": _count(job.dataset, mirror), "labels": {}})
        seeds, _ = cell["labels"].get(job.label, (0, False))
        cell["labels"][job.label] = (seeds + 1, _deterministic(job.config()))
    for (model, dataset), cell in sorted(d.cells.items()):
        for claim, a, b, direction in PAPER_CLAIMS:
            if a in cell["labels"] and b in cell["labels"]:
                d.rows.append((claim, model, dataset, a, b, direction, "acc", 1, [(model, dataset)], "plain"))
    for weak, strong in weaker_pairs(load_experiment(name), name):
        for model, dataset in sorted(d.cells):
            pair = [(weak, dataset), (strong, dataset)]
            if model == weak and all(
                k in d.cells and {"refine", "majority"} <= set(d.cells[k]["labels"]) for k in pair
            ):
                row = ("weaker models gain most", f"{weak} vs {strong}", dataset, "refine", "majority")
                d.rows.append(row + ("greater", "acc", 1, pair, "weaker"))


def design(name: str, mirror: str | None = None) -> Design:
    """The claims design of experiment `name` (config/experiment/<name>.yaml)."""
    from retrace.config.compose import load_experiment
    from retrace.config.families import FAMILIES

    mirror = mirror or default_mirror()
    exp, d = load_experiment(name), Design(name)
    spine_design(name, mirror, d)
    for family in FAMILIES.all():  # DRR's rows and ART's (retrace.config.families `claims_design`)
        if family.block and exp.get(family.block):
            family.claims_design(exp[family.block], mirror, d)
    return d


def _probabilities(rng, n: int, accuracy: float, conc: float) -> np.ndarray:
    p = rng.beta(max(accuracy * conc, 1e-3), max((1 - accuracy) * conc, 1e-3), n)
    return np.clip(p, 0.0, 1.0)


def _raise(p: np.ndarray, effect: float) -> np.ndarray:
    """p + c (1 - p) with the mean raised by `effect` (a negative effect lowers p alike)."""
    if effect >= 0:
        return p + min(1.0, effect / max(1e-9, 1.0 - p.mean())) * (1.0 - p)
    return p * (1.0 - min(1.0, -effect / max(1e-9, p.mean())))


def planted_effect(planted: dict | None, key: tuple[str, str], label: str) -> float:
    """A planted effect keyed (label, dataset) or (model, dataset, label); 0.0 where none."""
    planted = planted or {}
    return planted.get((key[0], key[1], label), planted.get((label, key[1]), 0.0))


def truth(d_row: tuple, planted: dict | None) -> float:
    """The planted difference a claim row measures (method minus baseline; gains for weaker rows)."""
    a, b, keys, kind = d_row[3], d_row[4], d_row[8], d_row[9]
    gaps = [planted_effect(planted, k, a) - planted_effect(planted, k, b) for k in keys]
    return gaps[0] - gaps[1] if kind == "weaker" else sum(gaps) / len(gaps)


def _label_probabilities(rng, p: np.ndarray, setting: tuple) -> np.ndarray:
    """A label's per-question success probabilities: the cell's shared `p`, or with an
    interaction strength s (setting[2]) (1 - s) p + s p', p' the label's own Beta draw of the
    same mean and concentration: equal average accuracy, different questions solved."""
    s = float(setting[2]) if len(setting) > 2 else 0.0
    if not s:
        return p
    return (1 - s) * p + s * _probabilities(rng, len(p), setting[0], setting[1])


def simulate_cells(d: Design, rng, setting: tuple, planted: dict | None = None) -> dict:
    """{(model, dataset): {label: states (seeds x n): 1 correct, 0 wrong, -1 abstained}};
    `setting` is (accuracy, concentration) or (accuracy, concentration, interaction)."""
    out: dict = {}
    for key, cell in d.cells.items():
        p = _probabilities(rng, cell["n"], setting[0], setting[1])
        out[key] = {}
        for label, (seeds, det) in cell["labels"].items():
            q = _raise(_label_probabilities(rng, p, setting), planted_effect(planted, key, label))
            u = rng.random((1 if det else seeds, cell["n"]))
            states = (u < q).astype(np.int8)
            if cell.get("drr"):
                states[(u >= q) & (u < q + 0.2 * (1 - q))] = -1
            out[key][label] = np.repeat(states, seeds, axis=0) if det else states
    return out


def score(states: np.ndarray, metric: str, k: float) -> np.ndarray:
    """Per-question scores of simulated states under a claims metric (see module docstring)."""
    correct, wrong = (states == 1).astype(float), (states == 0).astype(float)
    if metric == "fs":
        return correct - k * wrong
    if metric == "acc_d":
        return (states != 0).astype(float)
    return correct


def _gain(cells: dict, key, row) -> np.ndarray:
    a, b = (score(cells[key][lab], row[6], row[7]).mean(axis=0) for lab in (row[3], row[4]))
    return (a - b)[None, :]


def task_weights(d: Design, keys: list) -> np.ndarray:
    """Per-question weights of a task-averaged row over the cells `keys` (art/task_average:
    questions / (tasks x the task's questions)): the plain mean of weighted scores is the
    mean over tasks of each task's accuracy."""
    ns = [d.cells[k]["n"] for k in keys]
    return np.concatenate([np.full(n, sum(ns) / (len(ns) * n)) for n in ns])


def score_range(metric: str, k: float) -> float:
    """The span of one question's score under a claims metric: FS(k) runs from -k to 1."""
    return 1.0 + k if metric == "fs" else 1.0


def _matrices(d: Design, cells: dict, row: tuple, memo: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """(method scores, baseline scores, score range) of one design row on simulated states;
    `memo` keeps each side's matrix for the experiment's other rows."""
    a, b, metric, k, keys, kind = row[3], row[4], row[6], row[7], row[8], row[9]
    if kind == "weaker":
        return _gain(cells, keys[0], row), _gain(cells, keys[1], row), 2 * score_range(metric, k)

    def side(label: str) -> np.ndarray:
        at = (label, metric, k, tuple(keys))
        if at not in memo:
            memo[at] = np.concatenate([score(cells[key][label], metric, k) for key in keys], axis=1)
        return memo[at]

    ma, mb = side(a), side(b)
    if kind != "macro":
        return ma, mb, score_range(metric, k)
    w = task_weights(d, keys)
    return ma * w, mb * w, float(w.max()) * score_range(metric, k)


Z_SCREEN = 1.5  # |z| below it: the row's exact p is > 0.05 (tests/unit/test_claims_calibration.py)


def _counted_mean(m: np.ndarray, det: bool, memo: dict | None) -> np.ndarray:
    """Per-question mean over the seeds that count (scoring.seeds.counted_seeds), kept in
    `memo` by matrix (the memoised side matrices of _matrices live as long as it does)."""
    if memo is None:
        return counted_seeds(m, det, "")[0].mean(axis=0)
    key = ("mean", id(m), det)
    if key not in memo:
        memo[key] = counted_seeds(m, det, "")[0].mean(axis=0)
    return memo[key]


def _screened(d: Design, row: tuple, sides: tuple, dets: tuple, memo: dict | None) -> dict | None:
    """For the calibration (`screen`): a row whose sign-flip z-statistic (on the seeds that
    count, shifted by its margin) is below Z_SCREEN, as p = 1 without the exact test. Its exact
    p is above 0.05, above every Holm level, so every verdict of `adjust` is unchanged (a
    p above alpha is never rejected, and rows sorted after every rejected one do not move it)."""
    claim, direction = row[0], row[5]
    diff = _counted_mean(sides[0], dets[0], memo) - _counted_mean(sides[1], dets[1], memo)
    moved = diff - test_of(direction, d.margins.get(claim))
    ss = float(moved @ moved)
    if ss and abs(float(moved.sum())) >= Z_SCREEN * np.sqrt(ss):
        return None
    return {
        "p_value": 1.0,
        "delta": float(diff.mean()),
        "sd_diff": float(diff.std()),
        "n_questions": len(diff),
        "direction": direction,
        "margin": d.margins.get(claim),
        "verdict": "inconclusive",
    }


def rows_from_cells(d: Design, cells: dict, screen: bool = False) -> list[dict]:
    """Unadjusted claims rows of the design on simulated (or real) per-cell states; `screen`:
    rows that cannot be significant skip the exact test (_screened; the calibration's speed)."""
    out: list[dict] = []
    memo: dict = {}
    for row in d.rows:
        claim, model, dataset, a, b, direction, _, _, keys, kind = row
        ma, mb, span = _matrices(d, cells, row, memo)
        dets = (False, False)  # a weaker row compares two gains, one row each
        if kind != "weaker":
            dets = tuple(d.cells[keys[0]]["labels"][x][1] for x in (a, b))
        cmp = (
            _screened(d, row, (ma, mb), dets, memo if kind in ("plain", "pooled") else None)
            if screen
            else None
        )
        if cmp is None:
            cmp = compare_matrices(
                ma, mb, direction=direction, deterministic=dets, margin=d.margins.get(claim), score_range=span
            )
        cmp["score_range"] = span
        out.append({"claim": claim, "model": model, "dataset": dataset, "method": a, "baseline": b, **cmp})
    return out


def simulate_rows(
    d: Design, rng, setting: tuple, planted: dict | None = None, screen: bool = False
) -> list[dict]:
    """One simulated experiment's claims rows (before `adjust`)."""
    return rows_from_cells(d, simulate_cells(d, rng, setting, planted), screen)


def summary(d: Design) -> dict:
    """Rows per kind and cells per question count: a one-line description of the design."""
    kinds: defaultdict[str, int] = defaultdict(int)
    for row in d.rows:
        kinds[row[-1]] += 1
    return {"rows": dict(kinds), "questions": sorted({c["n"] for c in d.cells.values()})}
