"""The figures of curves over training steps, one line per group (median over its seeds, band
min-max) or per run: accuracy, D_eff and the progress measures. Each takes the frames of
sweepgrok.analysis.stats and a path, and returns the path it wrote (figure_layout.save).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sweepgrok.analysis import figure_layout as layout
from sweepgrok.analysis import stats
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD


def _wide(metrics: pd.DataFrame, column: str) -> pd.DataFrame:
    """step x run_id table of `column`, each run held at its last value after it stops.

    Runs stopped at their grok step (train.stop_after_grok) would otherwise leave only the slow
    runs at late steps, and a group's median curve would fall back down.
    """
    values = metrics.set_index(["step", "run_id"])[column]
    values = values[~values.index.duplicated(keep="last")]
    return values.unstack("run_id").sort_index().ffill()


def _bands(wide: pd.DataFrame, summary: pd.DataFrame, by: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per group label: median, min and max over its runs at each step (up to its last step)."""
    out = {}
    for values, rows in stats.iter_groups(summary, by):
        runs = [r for r in rows["run_id"] if r in wide.columns]
        if not runs:
            continue
        last = rows["steps_run"].max()
        part = wide.loc[(wide.index > 0) & (wide.index <= last), runs]  # log axis: no step 0
        band = pd.DataFrame({"median": part.median(axis=1), "min": part.min(axis=1)})
        band["max"] = part.max(axis=1)
        out[stats.group_label(by, values)] = band.dropna()
    return out


_LOG_SPAN = 10.0
"""Fit and grok steps spanning this factor or more get a log step axis: on a linear one the
fast groups would be crowded at its left edge."""


def step_axis(summary: pd.DataFrame, last_step: float) -> tuple[str, tuple[float, float]]:
    """("log" or "linear", x limits) of a step axis, chosen from the runs' fit and grok steps.

    Linear from 0 unless the steps span _LOG_SPAN or more. A log axis starts at a quarter of
    the earliest fit or grok step: the steps before it (chance accuracy, a few evaluations)
    would otherwise take half its width.
    """
    columns = [c for c in map(str, summary) if c == "fit_step" or c.startswith("grok_step_")]
    events = summary[columns].astype("Float64").to_numpy(float, na_value=np.nan).ravel()
    events = events[np.isfinite(events) & (events > 0)]
    right = max(float(last_step), float(events.max()) if events.size else 1.0)
    if not events.size or events.max() < _LOG_SPAN * events.min():
        return "linear", (0.0, right * 1.02)
    return "log", (float(events.min()) / 4, right * 1.15)


_PANEL_SIZE = (2.6, 1.6)
"""Plot area (inches) of each small panel."""


def _set_steps(ax: Axes, scale: str, limits: tuple[float, float]) -> None:
    ax.set_xscale(scale)
    ax.set_xlim(*limits)
    ax.grid(True, which="major", alpha=0.3)


def _finish_curves(
    fig: Figure,
    axes: list[Axes],
    ylabel: str,
    key_line: str,
    steps: tuple[str, tuple[float, float]],
) -> None:
    for ax in axes:
        _set_steps(ax, *steps)
    xlabel = "step (log)" if steps[0] == "log" else "step"
    if len(axes) == 1:
        axes[0].set_xlabel(xlabel)
        axes[0].set_ylabel(ylabel)
        layout.legend_below(fig, axes[0], key_line)
        layout.fit(fig, axes[0], *layout.CURVES_SIZE)
    else:
        fig.supxlabel(xlabel)
        fig.supylabel(ylabel)
        layout.fit(fig, axes[0], *_PANEL_SIZE)


def _draw_band(ax: Axes, band: pd.DataFrame, color: Any, label: str | None, **kw: Any) -> None:
    ax.plot(band.index, band["median"], color=color, label=label, **kw)
    ax.fill_between(band.index, band["min"], band["max"], color=color, alpha=0.2, lw=0)


def _mark(ax: Axes, curve: pd.Series, steps: Sequence[float], event: str, color: Any) -> None:
    """Markers on `curve` at `steps`: a star at a grok step, a hollow circle at a fit step
    (gid "grok" / "fit", so a test can find them)."""
    steps = [float(x) for x in steps if pd.notna(x)]
    if not steps or curve.empty:
        return
    ys = np.interp(steps, curve.index.to_numpy(float), curve.to_numpy(float))
    style = {"grok": {"marker": "*", "ms": 13, "mfc": color},
             "fit": {"marker": "o", "ms": 7, "mfc": "white"}}[event]
    ax.plot(steps, ys, ls="none", mec=color, mew=1.4, zorder=5, gid=event, **style)


def _event_legend(ax: Axes) -> None:
    """Legend entries for the fit and grok markers (grey, whatever the group's colour)."""
    ax.plot([], [], ls="none", marker="o", ms=7, mfc="white", mec="0.3", label="fit")
    ax.plot([], [], ls="none", marker="*", ms=13, mfc="0.3", mec="0.3", label="grok")


@layout.paper_style
def accuracy_curves(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    by: Sequence[str],
    path: Path,
    threshold: float = DEFAULT_GROK_THRESHOLD,
    per_run: bool = False,
) -> Path:
    """Test (solid) and train (dashed) accuracy per group: median over the group's seeds, band
    min-max, a hollow circle at the median fit step and a star at the median grok step; with
    `per_run`, every run's own curves and steps instead. A run that stopped is held at its
    last value. The step axis is linear or log as the fit and grok steps need (step_axis)."""
    order = layout.label_order(summary, by)
    colors = layout.palette(order)
    shown, key_line = layout.shown_labels(summary, by)
    wide_test, wide_train = _wide(metrics, "test_acc"), _wide(metrics, "train_acc")
    test, train = _bands(wide_test, summary, by), _bands(wide_train, summary, by)
    labelled = summary.assign(group=summary["run_id"].map(stats.run_labels(summary, by)))
    grok_col = f"grok_step_{stats.tag(threshold)}"
    what = "each run" if per_run else "median over seeds, band min-max"
    title = f"Accuracy ({what})\ntest solid, train dashed"
    fig, axes = layout.group_axes(len(order), title, key_line)
    single = len(axes) == 1
    for i, label in enumerate(order if single else order[: len(axes)]):
        ax, color = axes[0] if single else axes[i], colors[label]
        rows = labelled[labelled["group"] == label]
        if per_run:
            _draw_runs(ax, rows, wide_test, wide_train, color, shown[label], grok_col)
        else:
            if label in test:
                _draw_band(ax, test[label], color, shown[label])
                _mark(ax, test[label]["median"], [rows[grok_col].median()], "grok", color)
            if label in train:
                _draw_band(ax, train[label], color, None, ls="--", lw=1.2)
                _mark(ax, train[label]["median"], [rows["fit_step"].median()], "fit", color)
        if not single:
            ax.set_title(shown[label], fontsize="small")
    for ax in axes:
        ax.set_ylim(-0.02, 1.02)
    _event_legend(axes[0])
    last = float(metrics["step"].max()) if len(metrics) else 1.0
    _finish_curves(fig, axes, "accuracy", key_line, step_axis(summary, last))
    return layout.save(fig, path)


def _draw_runs(
    ax: Axes,
    rows: pd.DataFrame,
    wide_test: pd.DataFrame,
    wide_train: pd.DataFrame,
    color: Any,
    label: str,
    grok_col: str,
) -> None:
    """One group's runs: each run's test (solid) and train (dashed) curve up to its last
    step, a star at its grok step and a hollow circle at its fit step."""
    for k, row in enumerate(rows.to_dict("records")):
        run, last = row["run_id"], row["steps_run"]
        for wide, ls, step, event in ((wide_test, "-", row[grok_col], "grok"),
                                      (wide_train, "--", row["fit_step"], "fit")):
            if run not in wide.columns:
                continue
            curve = wide.loc[(wide.index > 0) & (wide.index <= last), run].dropna()
            name = label if k == 0 and ls == "-" else None
            ax.plot(curve.index, curve, color=color, ls=ls, lw=1.1, alpha=0.8, label=name)
            _mark(ax, curve, [step], event, color)


@layout.paper_style
def deff_curves(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    by: Sequence[str],
    path: Path,
    threshold: float = DEFAULT_GROK_THRESHOLD,
) -> Path:
    """D_eff per group (median over seeds, band min-max); dashed: the group's median grok
    step, dotted: its median collapse onset."""
    order = layout.label_order(summary, by)
    colors = layout.palette(order)
    shown, key_line = layout.shown_labels(summary, by)
    deff = metrics.dropna(subset=["deff"])
    bands = _bands(_wide(deff, "deff"), summary, by)
    labelled = summary.assign(group=summary["run_id"].map(stats.run_labels(summary, by)))
    title = "D_eff (median over seeds, band min-max)\ndashed: median grok, dotted: collapse"
    fig, axes = layout.group_axes(len(order), title, key_line)
    single = len(axes) == 1
    for i, label in enumerate(order if single else order[: len(axes)]):
        ax = axes[0] if single else axes[i]
        if label in bands:
            _draw_band(ax, bands[label], colors[label], shown[label])
        rows = labelled[labelled["group"] == label]
        for col, ls in ((f"grok_step_{stats.tag(threshold)}", "--"), ("collapse_step", ":")):
            step = rows[col].dropna()
            if len(step):
                ax.axvline(float(step.median()), color=colors[label], ls=ls, lw=1.2)
        if not single:
            ax.set_title(shown[label], fontsize="small")
    last = float(deff["step"].max()) if len(deff) else 1.0
    _finish_curves(fig, axes, "D_eff (participation ratio)", key_line, step_axis(summary, last))
    return layout.save(fig, path)


_PANEL_LINES = ("-", "--", ":")
"""Line styles of the columns of one progress panel (stats.PROGRESS_PANELS), in order."""
_PROGRESS_PANEL_SIZE = (2.4, 1.6)
"""Plot area (inches) of each progress_curves panel."""


@layout.paper_style
def progress_curves(
    metrics: pd.DataFrame, summary: pd.DataFrame, by: Sequence[str], path: Path
) -> Path:
    """The progress measures over training, one panel each (weight norms: whole model solid,
    token embedding dashed, unembedding dotted; logit norm and softmax-collapse share on the
    training split; D_eff on the test split; Nanda et al.'s restricted and excluded losses),
    one colour per group: median over its seeds, band min-max; a run that stopped is held at
    its last value. A panel whose column was never recorded (D_eff without geometry, the
    Nanda losses outside a Transformer on add or sub) says so."""
    order = layout.label_order(summary, by)
    colors = layout.palette(order)
    shown, key_line = layout.shown_labels(summary, by)
    fig, grid = layout.figure(9, 5.5, nrows=2, ncols=3, sharex=True, squeeze=False)
    steps = step_axis(summary, float(metrics["step"].max()) if len(metrics) else 1.0)
    axes = list(grid.ravel())
    fig.suptitle("Progress measures (median over seeds, band min-max)\n"
                 "weight norm: whole model solid, embedding dashed, unembedding dotted")
    for ax, (ylabel, columns) in zip(axes, stats.PROGRESS_PANELS, strict=True):
        drawn = False
        for column, ls in zip(columns, _PANEL_LINES, strict=False):
            values = metrics.dropna(subset=[column]) if column in metrics else metrics.iloc[:0]
            bands = _bands(_wide(values, column), summary, by) if len(values) else {}
            for label in order:
                if label in bands and len(bands[label]):
                    name = shown[label] if ax is axes[0] and ls == "-" else None
                    _draw_band(ax, bands[label], colors[label], name, ls=ls, lw=1.2)
                    drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "not recorded", ha="center", va="center", transform=ax.transAxes,
                    color="0.4")
        ax.set_ylabel(layout.wrap(ylabel, 16))  # at paper type sizes a long label outgrows a panel
        _set_steps(ax, *steps)
    axes[2].set_ylim(-0.02, 1.02)  # a share
    for ax in axes[3:]:
        ax.set_xlabel("step (log)" if steps[0] == "log" else "step")
    layout.legend_below(fig, axes[0], key_line)
    layout.fit(fig, axes[0], *_PROGRESS_PANEL_SIZE)
    return layout.save(fig, path)

