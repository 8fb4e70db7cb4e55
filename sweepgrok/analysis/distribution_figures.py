"""The figures of when runs grok: the grok steps of each group (box and points, censored runs
marked) and the Kaplan-Meier survival curves. Each takes the run summary of
sweepgrok.analysis.stats and a path, and returns the path it wrote (figure_layout.save).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from scipy import stats as sps

from sweepgrok.analysis import figure_layout as layout
from sweepgrok.analysis import stats
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD

_GROK_TIMES_WIDTH = 3.6
"""Plot area width (inches) of grok_times: long group labels widen the figure, not this."""


def _time_limits(times: np.ndarray, log: bool, notes: bool) -> tuple[float, float]:
    """x limits holding every drawn time with a margin (8% of the span each side, or 10% of
    the value when all are equal), and room right of them for the "n censored" notes."""
    xs = np.log10(np.maximum(times, 1.0)) if log else times.astype(float)
    lo, hi = float(xs.min()), float(xs.max())
    pad = 0.08 * (hi - lo) if hi > lo else (0.1 if log else max(0.1 * abs(hi), 1.0))
    left, right = lo - pad, hi + pad + (0.3 * (hi - lo + 2 * pad) if notes else 0.0)
    if not log:
        left = max(left, 0.0) if lo >= 0 else left
        return left, right
    return 10**left, 10**right


def _draw_grokked(ax: Axes, y: int, grok: np.ndarray, rng: np.random.Generator) -> None:
    """One group's grok steps on row `y`: a box (a bar for a single run) and jittered points."""
    if grok.size == 1:  # a box of one point has no width: a bar the box's height instead
        ax.plot(grok, [y], ls="none", marker="|", ms=24, mew=2.5, color="0.35", gid="one")
    elif grok.size:
        ax.boxplot(
            [grok],
            positions=[y],
            orientation="horizontal",
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            boxprops={"facecolor": "0.88", "edgecolor": "0.5"},
            medianprops={"color": "0.2"},
            whiskerprops={"color": "0.5"},
            capprops={"color": "0.5"},
        )
    if grok.size:
        ax.scatter(grok, y + rng.uniform(-0.15, 0.15, grok.size), s=30, color="C0", zorder=3)


def _draw_censored(ax: Axes, y: int, cens: np.ndarray, label: str | None) -> None:
    """One group's censored runs on row `y`: red '>' at their steps run, and how many."""
    ax.scatter(cens, np.full(cens.size, y), marker=">", s=45, color="C3", zorder=4, label=label)
    # Censored runs of one budget share a point: say how many sit there.
    ax.annotate(
        f" {cens.size} censored",
        (float(cens.max()), y),
        xytext=(6, 0),
        textcoords="offset points",
        va="center",
        fontsize="small",
        color="C3",
    )


def _set_time_axis(ax: Axes, summary: pd.DataFrame, threshold: float, notes: bool) -> None:
    """The grok-step axis: log when the times span more than 20x, fitted to every drawn time
    (with room for the "n censored" `notes`)."""
    all_times = _drawable(*stats.times_and_censoring(summary, threshold))[0]
    log = bool(all_times.size) and all_times.max() > 20 * max(all_times.min(), 1.0)
    if log:
        ax.set_xscale("log")
    if all_times.size:
        ax.set_xlim(*_time_limits(all_times, log, notes=notes))
    ax.set_xlabel(f"grok step (test acc >= {threshold:g})")
    ax.grid(True, axis="x", alpha=0.3)


@layout.paper_style
def grok_time_distribution(
    summary: pd.DataFrame, by: Sequence[str], path: Path, threshold: float = DEFAULT_GROK_THRESHOLD
) -> Path:
    """Grok steps per group (box + jittered points; a group with one grokked run: its point
    and a bar at it); censored runs as red '>' at their steps run (their grok step is
    larger). The x axis fits the times drawn, with a margin."""
    order = layout.label_order(summary, by)
    shown, key_line = layout.shown_labels(summary, by)
    fig, ax = layout.figure(5.5, 1.6 + 0.5 * len(order))
    rng = np.random.default_rng(0)  # jitter only; seeded so figures are reproducible
    n_grokked = n_censored = 0
    for y, (_, rows) in enumerate(stats.iter_groups(summary, by)):
        times, censored = _drawable(*stats.times_and_censoring(rows, threshold))
        grok, cens = times[~censored], times[censored]
        _draw_grokked(ax, y, grok, rng)
        if cens.size:  # the first group with censored runs labels them in the legend
            _draw_censored(ax, y, cens, None if n_censored else "censored (grok step > steps run)")
        n_grokked, n_censored = n_grokked + grok.size, n_censored + cens.size
    ax.set_yticks(range(len(order)), [shown[label] for label in order])
    ax.set_ylim(len(order) - 0.5, -0.5)  # first group on top, as in the table
    _set_time_axis(ax, summary, threshold, notes=n_censored > 0)
    title = f"Grok step per group ({n_grokked}/{n_grokked + n_censored} grokked)"
    # The key line wraps: a title wider than the plot would stick out of the figure.
    rows_line = layout.wrap("rows: " + key_line, layout.LABEL_CHARS)
    ax.set_title(f"{title}\n{rows_line}" if key_line else title)
    layout.legend_below(fig, ax)
    lines = max(label.count("\n") + 1 for label in shown.values())
    layout.fit(fig, ax, _GROK_TIMES_WIDTH, max(1.2, len(order) * (0.15 + 0.2 * lines)))
    return layout.save(fig, path)


def _drawable(times: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times with +inf (a diverged run whose budget is unknown) drawn at the longest finite
    time: the run is censored beyond every step shown, which is what the figure can say."""
    finite = times[np.isfinite(times)]
    edge = float(finite.max()) if finite.size else 1.0
    return np.where(np.isfinite(times), times, edge), censored


@layout.paper_style
def survival_curves(
    summary: pd.DataFrame, by: Sequence[str], path: Path, threshold: float = DEFAULT_GROK_THRESHOLD
) -> Path:
    """Kaplan-Meier fraction of runs not yet grokked vs step, per group; '|' marks censoring."""
    order = layout.label_order(summary, by)
    colors = layout.palette(order)
    shown, key_line = layout.shown_labels(summary, by)
    fig, ax = layout.figure(5.5, 4.0)
    for (_, rows), label in zip(stats.iter_groups(summary, by), order, strict=True):
        times, censored = _drawable(*stats.times_and_censoring(rows, threshold))
        data = sps.CensoredData(uncensored=times[~censored], right=times[censored])
        sf = sps.ecdf(data).sf
        x = np.r_[0.0, sf.quantiles, times.max()]
        y = np.r_[1.0, sf.probabilities, sf.probabilities[-1]]
        ax.step(x, y, where="post", color=colors[label], label=f"{shown[label]} (n={len(rows)})")
        ct = times[censored]
        ax.plot(ct, sf.evaluate(ct), "|", color=colors[label], ms=10, mew=1.5)
    ax.set_xlabel("step")
    ax.set_ylabel("fraction not yet grokked")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Kaplan-Meier survival\ngrok = test acc >= {threshold:g}; | = censored")
    layout.legend_below(fig, ax, key_line)
    layout.fit(fig, ax, *layout.CURVES_SIZE)
    return layout.save(fig, path)


