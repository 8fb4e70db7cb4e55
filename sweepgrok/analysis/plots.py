"""Figures of a sweep, as PNG, SVG or PDF files: every figure by name, the set a sweep gets
(``plot_all``, ``plot_summary_figures``) and a search's objective (``plot_objective``).

Every function takes the frames of sweepgrok.analysis.stats (metrics rows, the run summary), or a
search's trial values (``plot_objective``), and a path, writes one figure in the format its suffix
names and returns its path. The figures are drawn by curve_figures (accuracy, D_eff, progress
measures), distribution_figures (grok times, survival) and heatmap_figure, on the layout and file
formats of figure_layout (the only module that sets matplotlib's backend and makes figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from sweepgrok.analysis import figure_layout as layout
from sweepgrok.analysis.curve_figures import (
    accuracy_curves,
    deff_curves,
    progress_curves,
    step_axis,
)
from sweepgrok.analysis.distribution_figures import grok_time_distribution, survival_curves
from sweepgrok.analysis.heatmap_figure import grok_heatmap, heatmap_keys
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD
from sweepgrok.store.outputs import FigureFormat

__all__ = [
    "accuracy_curves",
    "deff_curves",
    "grok_heatmap",
    "grok_time_distribution",
    "heatmap_keys",
    "plot_all",
    "plot_objective",
    "plot_summary_figures",
    "progress_curves",
    "step_axis",
    "survival_curves",
]


def plot_all(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    by: Sequence[str],
    out_dir: Path,
    threshold: float = DEFAULT_GROK_THRESHOLD,
    fmt: FigureFormat | str = FigureFormat.png,
    per_run: bool = False,
) -> list[Path]:
    """Every figure that applies (heatmap: two or more keys; D_eff: geometry recorded;
    progress measures: recorded, by a sweep written since they exist), as `fmt` files (png,
    svg or pdf); `per_run`: the accuracy figure draws every run instead of each group's
    median and band."""
    out, ext = Path(out_dir), FigureFormat(fmt).value
    paths = [accuracy_curves(metrics, summary, by, out / f"accuracy.{ext}", threshold, per_run)]
    paths += plot_summary_figures(summary, by, out, threshold, fmt)
    if "deff" in metrics and metrics["deff"].notna().any():
        paths.append(deff_curves(metrics, summary, by, out / f"deff.{ext}", threshold))
    if "logit_norm" in metrics and metrics["logit_norm"].notna().any():
        paths.append(progress_curves(metrics, summary, by, out / f"progress.{ext}"))
    return paths


def plot_summary_figures(
    summary: pd.DataFrame,
    by: Sequence[str],
    out_dir: Path,
    threshold: float = DEFAULT_GROK_THRESHOLD,
    fmt: FigureFormat | str = FigureFormat.png,
) -> list[Path]:
    """The figures a run summary alone carries (no metrics/): grok times, survival, heatmap."""
    out, ext = Path(out_dir), FigureFormat(fmt).value
    paths = [
        grok_time_distribution(summary, by, out / f"grok_times.{ext}", threshold),
        survival_curves(summary, by, out / f"survival.{ext}", threshold),
    ]
    keys = heatmap_keys(by)
    if keys is not None:
        paths.append(grok_heatmap(summary, keys[0], keys[1], out / f"heatmap.{ext}", threshold))
    return paths


@layout.paper_style
def plot_objective(
    values: Sequence[tuple[int, float, bool]],
    path: str | Path,
    *,
    budget: int,
    mode: str = "min",
    title: str = "",
) -> Path:
    """A search: objective of each complete trial (dots), best so far (step line), budget (dashed).

    `values` are (trial number, objective, censored). Censored trials (never grokked, or stopped
    by the time cap) are drawn hollow so that a reader does not take them for grok times.
    """
    numbers = [n for n, _, _ in values]
    ys = [v for _, v, _ in values]
    fig, ax = layout.figure(6.4, 4.0)
    grok = [(n, v) for n, v, c in values if not c]
    cens = [(n, v) for n, v, c in values if c]
    if grok:
        ax.scatter(
            [n for n, _ in grok],
            [v for _, v in grok],
            s=22,
            color="C0",
            label="grokked (median step)",
        )
    if cens:
        ax.scatter(
            [n for n, _ in cens],
            [v for _, v in cens],
            s=22,
            facecolors="none",
            edgecolors="C3",
            label="censored (capped, or > budget)",
        )
    best: list[float] = []
    for y in ys:
        better = not best or (y < best[-1] if mode == "min" else y > best[-1])
        best.append(y if better else best[-1])
    if numbers:
        ax.step(numbers, best, where="post", color="C2", label="best so far")
    ax.axhline(budget, color="grey", linestyle="--", linewidth=1, label=f"budget {budget}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    ax.set_ylabel("objective (steps)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return layout.save(fig, Path(path))
