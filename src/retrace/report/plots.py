"""The report's figures, as PNG files written atomically.

    accuracy_vs_compute(result_rows(score_files), out_dir / "accuracy_vs_compute.png")
    depth_curves([json.load(f) for f in diagnostics_files], out_dir / "depth_curves.png")

`accuracy_vs_compute` takes the rows of `report.tables.result_rows`; `depth_curves` takes
diagnostics dicts {"job": {...}, "depths": [...]}, where "depths" is the per-depth list of
`scoring.refine_diagnostics.diagnose` (or that function's whole dict, which holds the list).
matplotlib is imported inside the functions, through its object API and the Agg canvas:
no pyplot, no display, no global backend switch, so importing this module stays cheap and
plotting in a worker thread is safe. PNGs carry no "Software" tag; byte-identical output
across matplotlib or freetype versions is not promised.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from retrace.util.atomic import atomic_open

TERA = 1e12
PNG_METADATA = {"Software": None}


def _figure(n_panels: int, width: float, height: float, **share: bool) -> tuple[Any, list]:
    """A Figure with `n_panels` side by side on an Agg canvas, and its axes as a list."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_panels, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n_panels, squeeze=False, **share)[0]
    return fig, list(axes)


def save_png(fig: Any, out_png: Path) -> Path:
    """Write `fig` to out_png through a temporary sibling (retrace.util.atomic); return the path."""
    out_png = Path(out_png)
    with atomic_open(out_png, "wb") as f:
        fig.savefig(f, format="png", dpi=120, metadata=PNG_METADATA)
    return out_png


def method_points(rows: Iterable[dict]) -> list[dict]:
    """One point per (dataset, model, method): seed means of accuracy and effective FLOPs.

    The error bar is the envelope of the seeds' 95% CIs (lowest ci_low, highest ci_high):
    with one seed it is that seed's bootstrap CI, with several it is never narrower than any.
    """
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    if frame.empty:
        return []
    keys = ["dataset", "model", "method"]
    frame[keys] = frame[keys].astype(str)
    points = frame.groupby(keys, sort=False).agg(
        n_seeds=("seed", "size"),
        accuracy=("accuracy", "mean"),
        ci_low=("ci_low", "min"),
        ci_high=("ci_high", "max"),
        tflops=("flops_effective", "mean"),
    )
    points["tflops"] = points["tflops"].astype(float) / TERA
    return points.reset_index().to_dict("records")


def equal_compute_lines(points: list[dict]) -> list[dict]:
    """Where the equal-compute comparison sits: refinement's compute, per model and dataset
    (the Maj@N' baseline is priced to it, so its point should lie on this line)."""
    return [
        {"dataset": p["dataset"], "model": p["model"], "tflops": p["tflops"]}
        for p in points
        if p["method"] == "refine" and p["tflops"] > 0
    ]


def _model_colours(models: Iterable[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {m: cmap(i % 10) for i, m in enumerate(sorted(set(models)))}


def _plot_dataset(ax: Any, dataset: str, points: list[dict], colours: dict) -> None:
    """One dataset's panel: a labelled marker with CI error bars per (model, method)."""
    for p in points:
        err = [[p["accuracy"] - p["ci_low"]], [p["ci_high"] - p["accuracy"]]]
        ax.errorbar(
            [p["tflops"]],
            [p["accuracy"]],
            yerr=err,
            fmt="o",
            capsize=3,
            color=colours[p["model"]],
            label=p["model"],
        )
    # Neighbours at one accuracy take turns above and below their points, one name a line.
    row_index: dict[float, int] = {}
    for (x, y), methods in sorted(point_labels(points).items()):
        i = row_index[round(y, 2)] = row_index.get(round(y, 2), -1) + 1
        above = i % 2 == 0
        ax.annotate(
            "\n".join(methods),
            (x, y),
            textcoords="offset points",
            xytext=(4, 4 if above else -4),
            va="bottom" if above else "top",
            fontsize=7,
        )
    for line in equal_compute_lines(points):
        ax.axvline(line["tflops"], color=colours[line["model"]], linestyle=":", linewidth=1)
        ax.annotate(
            "refine's compute",
            (line["tflops"], 0.02),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=7,
            color=colours[line["model"]],
            ha="right",
        )
    # A log axis cannot show zero FLOPs (e.g. a fake backend with no parameter count).
    if all(p["tflops"] > 0 for p in points):
        ax.set_xscale("log")
    ax.set_title(dataset)
    ax.set_xlabel("effective compute (TFLOPs)")
    ax.grid(True, which="both", alpha=0.3)


def point_labels(points: list[dict]) -> dict[tuple[float, float], list[str]]:
    """One label per spot: methods whose points would print their names over each other (on
    a small set accuracies are a few discrete values, and methods that share rollouts share
    compute) are named together, at the first one's point. Spots are 2% of accuracy and 0.05
    decades of compute wide, since the compute axis is logarithmic."""
    import math

    spots: dict[tuple, tuple[tuple[float, float], list[str]]] = {}
    for p in points:
        x = math.log10(p["tflops"]) if p["tflops"] > 0 else 0.0
        key = (round(p["accuracy"] / 0.02), round(x / 0.05))
        spot = spots.setdefault(key, ((p["tflops"], p["accuracy"]), []))
        if p["method"] not in spot[1]:
            spot[1].append(p["method"])
    return dict(spots.values())


def _legend_by_label(fig: Any, axes: list) -> None:
    """One legend entry per model, however many panels and points it appears in."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside right upper", fontsize=8)


def accuracy_vs_compute(score_rows: list[dict], out_png: Path) -> Path:
    """Accuracy [95% CI] against effective TFLOPs, one panel per dataset; writes out_png."""
    points = method_points(score_rows)
    if not points:
        raise ValueError("no score rows to plot")
    datasets = sorted({p["dataset"] for p in points})
    colours = _model_colours(p["model"] for p in points)
    fig, axes = _figure(len(datasets), 5.0, 4.0, sharey=True)
    for ax, dataset in zip(axes, datasets):
        _plot_dataset(ax, dataset, [p for p in points if p["dataset"] == dataset], colours)
    axes[0].set_ylabel("accuracy (95% CI)")
    _legend_by_label(fig, axes)
    return save_png(fig, out_png)


def depth_records(diagnostic: dict) -> list[dict]:
    """The per-depth list of one diagnostics dict ("depths" may hold diagnose's whole dict)."""
    depths = diagnostic.get("depths")
    if isinstance(depths, dict):
        depths = depths.get("depths")
    if not isinstance(depths, list) or not depths:
        raise ValueError(f"diagnostics for {diagnostic.get('job')} hold no per-depth records")
    return depths


def job_label(job: dict) -> str:
    """ "method · model · dataset · seed s" (plus the backend when there is one)."""
    parts = [job.get(k) for k in ("method", "model", "backend", "dataset")]
    return " · ".join(str(p) for p in parts if p) + f" · seed {job.get('seed', '?')}"


def _series(depths: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(depths, values) of `key` where present; flips and B(d) start at depth 1."""
    pts = [(d["depth"], d[key]) for d in depths if d.get(key) is not None]
    return [x for x, _ in pts], [y for _, y in pts]


def short_labels(jobs: list[dict]) -> tuple[list[str], str]:
    """(a legend label per job, the title they share): what every job has in common (the
    model, backend, dataset) goes once into the title, so the legend names only what differs
    and fits under the panels."""
    if len(jobs) < 2:
        return [job_label(j) for j in jobs], ""
    keys = ("method", "model", "backend", "dataset", "seed")
    parts = [[str(j.get(k)) if k != "seed" else f"seed {j.get(k, '?')}" for k in keys] for j in jobs]
    varies = [len({p[i] for p in parts}) > 1 for i in range(len(keys))]
    labels = [" · ".join(v for v, d in zip(p, varies, strict=True) if d and v != "None") for p in parts]
    common = " · ".join(v for v, d in zip(parts[0], varies, strict=True) if not d and v != "None")
    return [label or job_label(j) for label, j in zip(labels, jobs, strict=True)], common


def _plot_job(axes: list, diagnostic: dict, colour: Any, label: str | None = None) -> None:
    """One refinement job's lines on the accuracy, flip-rate and B(d) panels."""
    depths = depth_records(diagnostic)
    label = label or job_label(diagnostic.get("job") or {})
    axes[0].plot(*_series(depths, "accuracy"), "o-", color=colour, label=label)
    axes[1].plot(*_series(depths, "recovery_rate"), "o-", color=colour)
    axes[1].plot(*_series(depths, "regression_rate"), "s--", color=colour)
    axes[2].plot(*_series(depths, "benefit"), "o-", color=colour)


def _label_depth_axes(axes: list) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    titles = (
        "vote accuracy by depth",
        "vote flips vs depth d-1 (share of problems)",
        "net correction benefit B(d) per rollout",
    )
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("refinement depth")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    for ax in axes[:2]:  # accuracy and flip shares are fractions of the problems
        ax.set_ylim(-0.02, 1.02)
    axes[2].axhline(0.0, color="grey", linewidth=0.8)
    axes[1].legend(
        [
            Line2D([], [], color="k", linestyle="-", marker="o"),
            Line2D([], [], color="k", linestyle="--", marker="s"),
        ],
        ["recovery (wrong→right)", "regression (right→wrong)"],
        fontsize=8,
    )


def depth_curves(diagnostics: list[dict], out_png: Path) -> Path:
    """Accuracy, recovery/regression rates and B(d) against depth, a line per job."""
    if not diagnostics:
        raise ValueError("no refinement diagnostics to plot")
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    fig, axes = _figure(3, 4.5, 3.6, sharex=True)
    labels, common = short_labels([d.get("job") or {} for d in diagnostics])
    for i, (diagnostic, label) in enumerate(zip(diagnostics, labels, strict=True)):
        _plot_job(axes, diagnostic, cmap(i % 10), label)
    _label_depth_axes(axes)
    if common:
        fig.suptitle(common, fontsize=10)
    # columns as wide as the longest label allows across the figure (13.5 in at 8 pt: ~150 chars)
    ncols = max(1, min(len(labels), 150 // (max(len(label) for label in labels) + 6)))
    fig.legend(loc="outside lower center", fontsize=8, ncols=ncols)
    return save_png(fig, out_png)
