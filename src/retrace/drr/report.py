"""Stage `drr summarise`: the DRR claims CSV, the report section JSON and the DM loss curve.

    python -m retrace drr summarise --episodes E.jsonl ... --train-metrics T.json ... \
        --questions Q.jsonl ... --leak leak.json --claims-out C.csv --section-out S.json --plot-out L.png

Episode files are named results/drr/<model>/<backend>/eval/<dataset>/seed<s>/episodes/<method>.jsonl
and train metrics results/drr/<model>/<backend>/dm/seed<s>/<variant>/train.json; the parts
of those paths say which run a file belongs to.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from retrace.drr import metrics, settings
from retrace.drr.claims import OVERALL, claims, decision_view, falsifier_notes, pooled
from retrace.scoring.claims import write_claims_csv
from retrace.store.provenance import load, prov_path
from retrace.util.atomic import read_jsonl, write_json
from retrace.util.hashing import sha256_file

COLUMNS = [
    "model",
    "dataset",
    "seed",
    "method",
    "n",
    "acc (abstain = wrong) %",
    "acc (abstain = last attempt) %",
    "abstain %",
    "FS(1)",
    "FS(3)",
    "Acc(D)",
    "DM precision",
    "DM recall",
    "DM FPR",
    "mean turns",
]


def run_of(path: Path, marker: str) -> tuple[str, str, str, str, str]:
    """(model, backend, dataset-or-'', seed, name) from a DRR result path."""
    parts = Path(path).parts
    i = parts.index(marker)
    if marker == "eval":  # <model>/<backend>/eval/<dataset>/seed<s>/episodes/<method>.jsonl
        return parts[i - 2], parts[i - 1], parts[i + 1], parts[i + 2][4:], Path(path).stem
    return parts[i - 2], parts[i - 1], "", parts[i + 1][4:], parts[i + 2]  # dm/seed<s>/<variant>/train.json


def _r(x, nd: int = 1):
    return None if x is None else round(float(x), nd)


def metrics_row(model, dataset, seed, method, eps) -> list:
    s = {**metrics.drr_summary(eps), "acc_d": metrics.critic_decision_accuracy(decision_view(eps))}
    return [
        model,
        dataset,
        seed,
        method,
        s["n_questions"],
        _r(s["accuracy_abstain_as_wrong"]),
        _r(s["accuracy_abstain_as_last_attempt"]),
        _r(s["abstention_rate"]),
        _r(s["fs_1"]),
        _r(s["fs_3"]),
        _r(s["acc_d"]),
        _r(s["dm_precision_accept"], 3),
        _r(s["dm_recall_accept"], 3),
        _r(s["dm_false_positive_rate"], 3),
        _r(sum(len(e["turns"]) for e in eps) / max(1, len(eps)), 2),
    ]


def nota_variant(eps: list, method: str, nota: str) -> tuple[str, list] | None:
    """(label, episodes) of the other "none of the above" reading, for the Abstain baseline and
    any method that ended an episode on NOTA; None otherwise (drr/episodes.py)."""
    from retrace.drr.episodes import NOTA_READINGS, nota_reading

    if method != "abstain" and not any(e["turns"] and e["turns"][-1].get("abstain") for e in eps):
        return None
    other = next(r for r in NOTA_READINGS if r != nota)
    label = {"abstain": "NOTA = abstention", "wrong": "NOTA = wrong"}[other]
    return f"{method} [{label}]", [nota_reading(e, other) for e in eps]


def loss_plot(train_files: list[Path], out_png: Path) -> Path:
    from retrace.report.plots import _figure, save_png

    fig, axes = _figure(1, 6.0, 3.6)
    for f in train_files:
        model, _, _, seed, variant = run_of(f, "dm")
        loss = json.loads(Path(f).read_text())["loss"]
        axes[0].plot(range(1, len(loss) + 1), loss, label=f"{model} seed {seed} {variant}")
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("training loss (Eq. 1)")
    axes[0].set_title("DRR discriminator training loss")
    if axes[0].lines:  # a simulated DM (drr/simulated_dm.py) has no loss curve
        axes[0].legend(fontsize=7)
    return save_png(fig, out_png)


def train_table(train_files: list[Path], notes: list[str]) -> dict:
    rows, prov = [], []
    for f in train_files:
        model, _, _, seed, variant = run_of(f, "dm")
        m = json.loads(Path(f).read_text())
        dev = m.get("dev") or {}
        if m.get("simulated"):
            notes.append(f"{model} seed {seed} {variant} DM is SIMULATED: {m['simulated']}.")
        if m.get("degenerate"):
            notes.append(
                f"{model} seed {seed} {variant} DM: {m['degenerate']}; its head is untrained, "
                "so its decisions are arbitrary."
            )
        cut = m.get("truncation") or {}
        rows.append(
            [
                model,
                seed,
                variant,
                f"{m['weights']['1']:g}:{m['weights']['0']:g}",
                m["n_train"],
                m["n_dev"],
                _r(dev.get("accuracy"), 3),
                _r(dev.get("precision_accept"), 3),
                _r(dev.get("recall_accept"), 3),
                _r(m["loss"][-1] if m["loss"] else None, 4),
                cut.get("rows_cut"),
                cut.get("rows_judged_cut"),
            ]
        )
        prov.append(sha256_file(prov_path(f)))
    return {
        "caption": "Discriminator training (dev split grouped by question id; dev labels are never shuffled)",
        "columns": [
            "model",
            "seed",
            "variant",
            "w_accept:w_reject",
            "train rows",
            "dev rows",
            "dev accuracy",
            "dev precision (Accept)",
            "dev recall (Accept)",
            "final train loss",
            "train rows cut to max_length",
            "of them with the judged answer/rationale cut",
        ],
        "rows": rows,
        "prov": prov,
    }


def _fpr(eps) -> float | None:
    return metrics.discriminator_stats(eps)["false_positive_rate"] if eps else None


def weighting_table(
    runs: Mapping, seeds: Mapping, hashes: Mapping, train_files: list[Path], cfg: Mapping
) -> dict:
    """The weighted (w_accept:w_reject = r:1) and unweighted DMs' false-positive rates side by
    side, on the dev rows and on the evaluation turns, with the P(correct) threshold each
    weighting implies (dm_data.implied_accept_threshold)."""
    from retrace.drr.dm_data import implied_accept_threshold

    ratio, t = float(cfg["dm"]["accept_weight_ratio"]), float(cfg["dm"]["accept_threshold"])
    dev = {}
    for f in train_files:
        model, _, _, seed, variant = run_of(f, "dm")
        dev[(model, seed, variant)] = (json.loads(Path(f).read_text()).get("dev") or {}).get(
            "false_positive_rate"
        )
    rows, prov = [], []
    for (model, dataset), methods in sorted(runs.items()):
        unweighted = dict(
            zip(seeds[(model, dataset)].get("drr_unweighted", []), methods.get("drr_unweighted", []))
        )
        for seed, w_eps, h in zip(
            seeds[(model, dataset)].get("drr", []),
            methods.get("drr", []),
            hashes[(model, dataset)].get("drr", []),
        ):
            u_eps = unweighted.get(seed)
            prov.append(h)
            rows.append(
                [
                    model,
                    dataset,
                    seed,
                    _r(implied_accept_threshold(ratio, t), 3),
                    _r(_fpr(w_eps), 3),
                    _r(implied_accept_threshold(1.0, t), 3),
                    _r(_fpr(u_eps), 3),
                    _r(dev.get((model, seed, "weighted")), 3),
                    _r(dev.get((model, seed, "unweighted")), 3),
                ]
            )
    return {
        "caption": (
            f"Accept weighting: the {ratio:g}:1 DM (Section 4.2, as printed) against the 1:1 DM. "
            f"Accepting at P(Accept) > {t:g}, a {ratio:g}:1 weight on 1:1 downsampled rows accepts "
            "when P(correct) exceeds the implied threshold (lower = more lenient); FPR = share of "
            "wrong answers accepted"
        ),
        "columns": [
            "model",
            "dataset",
            "seed",
            f"{ratio:g}:1 implied P(correct) threshold",
            f"{ratio:g}:1 FPR (eval turns)",
            "1:1 implied P(correct) threshold",
            "1:1 FPR (eval turns)",
            f"{ratio:g}:1 FPR (dev rows)",
            "1:1 FPR (dev rows)",
        ],
        "rows": rows,
        "prov": prov,
    }


def leak_table(leak: dict, leak_file: Path) -> dict:
    return {
        "caption": "Gold-leak check over every stored prompt and DM row (drr/leak.py)",
        "columns": ["verdict", "records scanned", "findings", "rows with findings", "by kind", "unchecked"],
        "rows": [
            [
                leak["verdict"],
                leak["n_records"],
                leak["n_findings"],
                leak["n_rows_with_findings"],
                json.dumps(leak["by_kind"]),
                leak["n_unchecked"],
            ]
        ],
        "prov": [sha256_file(prov_path(leak_file))],
    }


def ran_by_method(episode_files: list[Path]) -> dict:
    """{(model, dataset, method): {part: what ran}} from each episode file's provenance `ran`
    (drr/episodes.ran_parts, drr/sft.py), with OVERALL the union of a model's datasets. A record
    without `ran` (made before it was recorded) says "unknown"."""
    out: dict = defaultdict(dict)
    for f in episode_files:
        model, _, dataset, _, method = run_of(f, "eval")
        ran = load(f).get("ran") or {"run": "unknown"}
        for key in ((model, dataset, method), (model, OVERALL, method)):
            for part, what in ran.items():
                out[key].setdefault(part, set()).add(str(what))
    return out


def label_engine(row: dict, parts: dict) -> None:
    """claims.csv `engine` of a DRR row: "simulated" when any part of either side was (the
    reasoner's engine, the DM, SFT-LoRA), naming those parts in the note; else the engines."""
    sides = [parts.get((row["model"], row["dataset"], m), {}) for m in (row["method"], row["baseline"])]
    sim = sorted({p for side in sides for p, what in side.items() if "simulated" in what})
    engines = sorted({w for side in sides for w in side.get("reasoner", set()) | side.get("sft_lora", set())})
    row["engine"] = "simulated" if sim else "+".join(engines) or "unknown"
    if sim:
        row["note"] = "; ".join(filter(None, [row.get("note", ""), f"simulated: {', '.join(sim)}"]))


def _episode_table(cfg: Mapping, episode_files: list[Path]) -> tuple:
    """(runs, hashes, seeds by (model, dataset) and method; the metrics table's rows and their
    provenance hashes) of the evaluation episodes, a NOTA variant row beside each where it differs."""
    runs: dict = defaultdict(lambda: defaultdict(list))
    hashes: dict = defaultdict(lambda: defaultdict(list))
    seeds: dict = defaultdict(lambda: defaultdict(list))
    table, table_prov = [], []
    for f in sorted(episode_files, key=str):
        model, _, dataset, seed, method = run_of(f, "eval")
        eps = read_jsonl(f)
        runs[(model, dataset)][method].append(eps)
        seeds[(model, dataset)][method].append(seed)
        h = sha256_file(prov_path(f))
        hashes[(model, dataset)][method].append(h)
        table.append(metrics_row(model, dataset, seed, method, eps))
        table_prov.append(h)
        other = nota_variant(eps, method, cfg["nota"])
        if other:
            table.append(metrics_row(model, dataset, seed, other[0], other[1]))
            table_prov.append(h)
    return runs, hashes, seeds, table, table_prov


def _fixed_notes(cfg: Mapping) -> list[str]:
    """The section's notes that depend on the configuration alone."""
    return [
        (
            "A final 'none of the above' answer is scored as "
            + (
                "WRONG (as Table 1's Abstain rows imply: their FS(1) = 2·Acc − 100 and FS(3) = 4·Acc − 300, "
                "i.e. no abstentions); rows labelled [NOTA = abstention] show the abstention reading."
                if cfg["nota"] == "wrong"
                else "an ABSTENTION (drr.nota: abstain; Table 1's Abstain rows imply it was scored as wrong); "
                "rows labelled [NOTA = wrong] show the paper's reading."
            )
            + " Claims use the configured reading. Acc(D) always counts a NOTA as a decision to abstain "
            "(Figure 2: Abstain's Acc(D) exceeds its Acc)."
        ),
        (
            f"Accept weight: w_accept = {cfg['dm']['accept_weight_ratio']:g} x w_reject as Section 4.2 prints it, "
            f"accepting at P(Accept) > {cfg['dm']['accept_threshold']:g}. On 1:1 downsampled rows "
            "this accepts when P(correct) exceeds the 'implied threshold' of the weighting table (0.25 for 3:1 "
            "at 0.5), more lenient than the unweighted DM, not the stricter acceptance Sections 3.2 and 6 "
            "intend; the table gives both weightings' false-positive rates side by side "
            "(drr/dm_data.implied_accept_threshold)."
        ),
        "Accuracy is reported twice, labelled: abstentions scored as wrong (Section 6) and as what "
        "the last attempt answered (consistent with Table 1's DRR rows; scoring/metrics.py).",
        "always_accept gives CoT's answers with the judge's Acc(D) rule; always_reject abstains on "
        "every question (FS = 0 by construction).",
        "The leak scanner cannot see paraphrased golds or leaks through labels/ordering (see "
        "drr/leak.py); the reasoner's own answers echoed in re-prompts are trusted.",
        "Claims with fewer than 10 questions are inconclusive by rule (scoring/claims.py).",
    ]


def summarise(
    cfg: Mapping,
    episode_files: list[Path],
    train_files: list[Path],
    question_files: list[Path],
    leak_file: Path,
    claims_out: Path,
    section_out: Path,
    plot_out: Path,
) -> dict:
    runs, hashes, seeds, table, table_prov = _episode_table(cfg, episode_files)
    leak = json.loads(Path(leak_file).read_text())
    from retrace.drr.leakcheck import refuse

    refuse(leak, cfg["leak_check"], str(leak_file))  # no claims from a leaking run
    all_runs, all_seeds, all_hashes = pooled(runs, seeds, hashes)
    for (model, dataset), methods in sorted(all_runs.items()):
        for method, per_seed in methods.items():
            for seed, eps in zip(all_seeds[(model, dataset)][method], per_seed, strict=True):
                table.append(metrics_row(model, dataset, seed, method, eps))
                table_prov.append(all_hashes[(model, dataset)][method][0])
    rows = claims({**runs, **all_runs}, {**hashes, **all_hashes}, cfg["acc_abstention"])
    parts = ran_by_method(episode_files)
    for row in rows:  # from what ran (the episodes' records), never from the configured backend
        label_engine(row, parts)
    write_claims_csv(rows, claims_out)
    loss_plot(train_files, plot_out)
    dm_notes: list[str] = []
    split_notes = sorted({load(q)["split"]["note"] for q in question_files})
    section = {
        "title": "DRR: discriminator-guided reasoning",
        "intro": (
            "Distillation-Reinforcement-Reasoning (the DRR paper): the reasoner's own accept/reject "
            "behaviour on training questions (Algorithm 1) trains a small discriminator that then "
            "stops or re-prompts the reasoner at inference. All methods share the reasoner and the "
            "questions; CoT is the first DRR turn (Appendix B); always-accept/always-reject and a "
            "DM trained on shuffled labels are falsifiers judged over the same stored turns. "
            f"Gold-leak check: {leak['verdict'].upper()}."
        ),
        "tables": [
            {
                "caption": "Methods on the evaluation questions (FS(k): +1 correct, -k wrong, 0 abstain, "
                "percent; Acc(D): critic-decision accuracy; DM columns over all judged turns)",
                "columns": COLUMNS,
                "rows": table,
                "prov": table_prov,
            },
            train_table(train_files, dm_notes),
            weighting_table(runs, seeds, hashes, train_files, cfg),
            leak_table(leak, leak_file),
        ],
        "images": [str(plot_out)],
        "notes": split_notes
        + [
            f"Dataset '{OVERALL}' is Table 1's Overall (Combined) column: the questions of every "
            f"dataset ({', '.join(sorted({d for _, d in runs}))}) pooled into one set, its claims "
            "paired question by question."
        ]
        + dm_notes
        + falsifier_notes(rows)
        + _fixed_notes(cfg),
    }
    write_json(section_out, section)
    inputs = list(episode_files) + list(train_files) + list(question_files) + [leak_file]
    for out in (claims_out, plot_out, section_out):
        settings.provenance("summarise", cfg, inputs + ([plot_out] if out == section_out else [])).write(out)
    return {"claims": len(rows), "leak": leak["verdict"]}
