"""Figures of a sweep, as PNG, SVG or PDF files (the only module that imports seaborn/matplotlib).

Every function takes the frames of sweepgrok.analysis.stats (metrics rows, the run summary), or a
search's trial values (``plot_objective``), and a path, writes one figure in the format its suffix
names and returns its path. The Agg backend is forced: analysis runs on laptops and headless servers
alike, never needing a display.

Layout: labels, titles and legends take their room from the figure, never from the plot. Every
figure uses matplotlib's constrained layout, legends sit below the axes, long group labels drop
their key names (named once, in the legend's title) and wrap, and the figure grows until each
plot area has the size it was given (``_fit``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from itertools import product
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from scipy import stats as sps

from sweepgrok.analysis import stats
from sweepgrok.analysis.labels import key_labels
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD
from sweepgrok.store.outputs import FigureFormat

_DPI = 120
"""PNG resolution: a 10-inch figure is 1200 pixels wide, sharp on screen and in a report."""

_VECTOR_RC = {"svg.fonttype": "path", "pdf.fonttype": 3, "svg.hashsalt": "sweepgrok"}
"""matplotlib's own defaults, pinned against a user's matplotlibrc: SVG text as glyph outlines
(<path>: it looks the same without the font installed, at the cost of editable text), PDF fonts
embedded as Type 3 subsets; so a figure reads the same on every machine. A fixed salt for SVG
element ids, which are otherwise random."""

_NO_DATE: dict[FigureFormat, dict[str, Any] | None] = {
    FigureFormat.png: None,
    FigureFormat.svg: {"Date": None},
    FigureFormat.pdf: {"CreationDate": None},
}
"""No creation date in vector files: the same sweep gives byte-identical figures."""


_PAPER_RC = {
    "font.size": 13,
    "axes.titlesize": 13,
    "axes.labelsize": 13,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "legend.fontsize": 12,
    "legend.title_fontsize": 12,
    "figure.titlesize": 13,
    "lines.linewidth": 1.8,
}
"""Type sizes for a paper: a one-axis figure is about 5.5 inches wide, so shrunk to a column
(3.3 inches) its smallest text ("small", 0.83 x 13 pt) still reads at about 6.5 pt."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _paper_style(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run a figure function under _PAPER_RC (fonts are fixed when a text is made, so the
    whole drawing, not only the save, needs it)."""

    @functools.wraps(draw)
    def styled(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with matplotlib.rc_context(_PAPER_RC):  # type: ignore[arg-type]
            return draw(*args, **kwargs)

    return styled


def _save(fig: Figure, path: Path) -> Path:
    """Write `fig` in the format of the path's suffix (png, svg or pdf), then close it."""
    path = Path(path)
    try:
        fmt = FigureFormat(path.suffix.lstrip(".").lower())  # ValueError on any other suffix
        path.parent.mkdir(parents=True, exist_ok=True)
        with matplotlib.rc_context(_VECTOR_RC):  # type: ignore[arg-type]
            fig.savefig(path, dpi=_DPI, format=fmt.value, metadata=_NO_DATE[fmt])
    finally:  # a failed write leaks no figure into a long report
        plt.close(fig)
    return path


def _figure(width: float, height: float, **kw: Any) -> tuple[Figure, Any]:
    """plt.subplots with constrained layout (titles, labels, colour bars, legends placed
    "outside" all get room without overlapping)."""
    return plt.subplots(figsize=(width, height), layout="constrained", **kw)


def _fit(fig: Figure, ax: plt.Axes, width: float, height: float) -> None:
    """Grow `fig` until `ax` (and every panel of its grid) is at least `width` x `height`
    inches and nothing drawn sticks out of the figure.

    Constrained layout gives decorations (tick labels, titles, legends) their size in inches
    and the plot area what is left; growing the figure by the missing inches hands them back
    to the plot, so long labels widen the figure instead of squeezing the plot.
    """
    spec = ax.get_subplotspec()
    nrows, ncols = spec.get_gridspec().get_geometry() if spec is not None else (1, 1)
    for _ in range(2):  # the second pass catches a legend re-wrapped by the first
        fig.canvas.draw()
        box = ax.get_position()
        fig_w, fig_h = fig.get_size_inches()
        grow_w = max(0.0, width - box.width * fig_w) * ncols
        grow_h = max(0.0, height - box.height * fig_h) * nrows
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg's, not in stubs
        drawn = fig.get_tightbbox(renderer)  # inches
        grow_w = max(grow_w, max(0.0, -drawn.x0) + max(0.0, drawn.x1 - fig_w))
        grow_h = max(grow_h, max(0.0, -drawn.y0) + max(0.0, drawn.y1 - fig_h))
        if grow_w < 0.01 and grow_h < 0.01:
            return
        fig.set_size_inches(fig_w + grow_w + 0.05, fig_h + grow_h + 0.05)


_LABEL_CHARS = 40
"""Longer group labels drop their key names (named once, in a legend title) and wrap."""


_BREAK_AFTER = re.compile(r"(?<=[\s_.+/])")
"""Where a label may break: after a space, or inside a name after '_', '.', '+' or '/'."""


def _wrap(text: str, width: int) -> str:
    """`text` on lines of at most `width` characters where it can break (a longer piece stays
    whole): "blocks.0.hook_resid_post" wraps as "blocks.0.hook_" "resid_post", not mid-word."""
    lines = [""]
    for piece in _BREAK_AFTER.split(text):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.strip() for line in lines)


def _shown_labels(summary: pd.DataFrame, by: Sequence[str]) -> tuple[dict[str, str], str]:
    """Group label -> the label drawn, and the key line that names the keys when they are dropped.

    Short labels are drawn whole ("norm=sphere, wd=0"). Long ones keep only the values
    ("spherical, 0"), the key line ("norm, wd") says once what they are, and they wrap.
    """
    groups = [values for values, _ in stats.iter_groups(summary, by)]
    full = [stats.group_label(by, values) for values in groups]
    if max(map(len, full), default=0) <= _LABEL_CHARS:
        return dict(zip(full, full, strict=True)), ""
    short = [", ".join(stats.format_value(v) for v in values) for values in groups]
    shown = [_wrap(label, _LABEL_CHARS) for label in short]
    return dict(zip(full, shown, strict=True)), ", ".join(key_labels(by))


_CHAR_INCHES = 0.075
"""Width of a character of a small legend entry, for a first guess of how many columns fit."""


def _legend_below(fig: Figure, ax: plt.Axes, title: str = "") -> None:
    """The axis' legend under the plot, in as many columns as the figure's width takes."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:  # nothing labelled (a sweep without metrics): no empty legend
        return
    longest = max(len(line) for label in labels for line in label.split("\n"))
    per_column = _CHAR_INCHES * longest + 0.8  # the handle and the gaps
    ncols = int(max(1, min(len(labels), fig.get_figwidth() // per_column)))
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=ncols,
        fontsize="small",
        title=title or None,
        title_fontsize="small",
        frameon=False,
    )


_PANELS_ABOVE = 6
"""More groups than this: one small panel per group instead of one crowded axis."""
_MAX_PANELS = 36


def _palette(labels: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    # tab10 repeats after ten colours; husl stays distinct for many groups.
    name = "tab10" if len(labels) <= 10 else "husl"
    return dict(zip(labels, sns.color_palette(name, len(labels)), strict=True))


def _label_order(summary: pd.DataFrame, by: Sequence[str]) -> list[str]:
    return [stats.group_label(by, values) for values, _ in stats.iter_groups(summary, by)]


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


_CURVES_SIZE = (4.4, 2.8)
"""Plot area (inches) of a figure with one axis: with its labels about 5.5 inches wide, a
column's width at 60% (see _PAPER_RC)."""
_PANEL_SIZE = (2.6, 1.6)
"""Plot area (inches) of each small panel."""


def _axes(n_groups: int, title: str, key_line: str) -> tuple[Figure, list[plt.Axes]]:
    """One wide axis for a few groups; a grid of small shared panels for many (the key line
    under the title names the keys of panel titles that show values only)."""
    if n_groups <= _PANELS_ABOVE:
        fig, ax = _figure(5.5, 4.0)
        fig.suptitle(title)
        return fig, [ax]
    ncols = min(5, n_groups)
    nrows = -(-min(n_groups, _MAX_PANELS) // ncols)
    fig, grid = _figure(
        3.2 * ncols,
        2.4 * nrows + 0.6,
        nrows=nrows,
        ncols=ncols,
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    axes = list(grid.ravel())
    for ax in axes[n_groups:]:
        ax.set_visible(False)
    for ax in axes[max(0, n_groups - ncols) : n_groups]:  # nothing below: this panel's ticks
        ax.xaxis.set_tick_params(labelbottom=True)
    fig.suptitle(f"{title}\npanels: {key_line}" if key_line else title)
    return fig, axes


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


def _set_steps(ax: plt.Axes, scale: str, limits: tuple[float, float]) -> None:
    ax.set_xscale(scale)
    ax.set_xlim(*limits)
    ax.grid(True, which="major", alpha=0.3)


def _finish_curves(
    fig: Figure,
    axes: list[plt.Axes],
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
        _legend_below(fig, axes[0], key_line)
        _fit(fig, axes[0], *_CURVES_SIZE)
    else:
        fig.supxlabel(xlabel)
        fig.supylabel(ylabel)
        _fit(fig, axes[0], *_PANEL_SIZE)


def _draw_band(ax: plt.Axes, band: pd.DataFrame, color: Any, label: str | None, **kw: Any) -> None:
    ax.plot(band.index, band["median"], color=color, label=label, **kw)
    ax.fill_between(band.index, band["min"], band["max"], color=color, alpha=0.2, lw=0)


def _mark(ax: plt.Axes, curve: pd.Series, steps: Sequence[float], event: str, color: Any) -> None:
    """Markers on `curve` at `steps`: a star at a grok step, a hollow circle at a fit step
    (gid "grok" / "fit", so a test can find them)."""
    steps = [float(x) for x in steps if pd.notna(x)]
    if not steps or curve.empty:
        return
    ys = np.interp(steps, curve.index.to_numpy(float), curve.to_numpy(float))
    style = {"grok": {"marker": "*", "ms": 13, "mfc": color},
             "fit": {"marker": "o", "ms": 7, "mfc": "white"}}[event]
    ax.plot(steps, ys, ls="none", mec=color, mew=1.4, zorder=5, gid=event, **style)


def _event_legend(ax: plt.Axes) -> None:
    """Legend entries for the fit and grok markers (grey, whatever the group's colour)."""
    ax.plot([], [], ls="none", marker="o", ms=7, mfc="white", mec="0.3", label="fit")
    ax.plot([], [], ls="none", marker="*", ms=13, mfc="0.3", mec="0.3", label="grok")


@_paper_style
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
    order = _label_order(summary, by)
    colors = _palette(order)
    shown, key_line = _shown_labels(summary, by)
    wide_test, wide_train = _wide(metrics, "test_acc"), _wide(metrics, "train_acc")
    test, train = _bands(wide_test, summary, by), _bands(wide_train, summary, by)
    labelled = summary.assign(group=summary["run_id"].map(stats.run_labels(summary, by)))
    grok_col = f"grok_step_{stats.tag(threshold)}"
    what = "each run" if per_run else "median over seeds, band min-max"
    title = f"Accuracy ({what})\ntest solid, train dashed"
    fig, axes = _axes(len(order), title, key_line)
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
    return _save(fig, path)


def _draw_runs(
    ax: plt.Axes,
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


@_paper_style
def grok_time_distribution(
    summary: pd.DataFrame, by: Sequence[str], path: Path, threshold: float = DEFAULT_GROK_THRESHOLD
) -> Path:
    """Grok steps per group (box + jittered points; a group with one grokked run: its point
    and a bar at it); censored runs as red '>' at their steps run (their grok step is
    larger). The x axis fits the times drawn, with a margin."""
    order = _label_order(summary, by)
    shown, key_line = _shown_labels(summary, by)
    groups = list(stats.iter_groups(summary, by))
    fig, ax = _figure(5.5, 1.6 + 0.5 * len(order))
    rng = np.random.default_rng(0)  # jitter only; seeded so figures are reproducible
    n_grokked = n_censored = 0
    for y, (_, rows) in enumerate(groups):
        times, censored = _drawable(*stats.times_and_censoring(rows, threshold))
        grok, cens = times[~censored], times[censored]
        n_grokked, n_censored = n_grokked + grok.size, n_censored + cens.size
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
        if cens.size:
            first = n_censored == cens.size
            label = "censored (grok step > steps run)" if first else None
            ax.scatter(
                cens, np.full(cens.size, y), marker=">", s=45, color="C3", zorder=4, label=label
            )
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
    ax.set_yticks(range(len(order)), [shown[label] for label in order])
    ax.set_ylim(len(order) - 0.5, -0.5)  # first group on top, as in the table
    all_times = _drawable(*stats.times_and_censoring(summary, threshold))[0]
    log = bool(all_times.size) and all_times.max() > 20 * max(all_times.min(), 1.0)
    if log:
        ax.set_xscale("log")
    if all_times.size:
        ax.set_xlim(*_time_limits(all_times, log, notes=n_censored > 0))
    ax.set_xlabel(f"grok step (test acc >= {threshold:g})")
    ax.grid(True, axis="x", alpha=0.3)
    title = f"Grok step per group ({n_grokked}/{n_grokked + n_censored} grokked)"
    # The key line wraps: a title wider than the plot would stick out of the figure.
    ax.set_title(f"{title}\n{_wrap('rows: ' + key_line, _LABEL_CHARS)}" if key_line else title)
    _legend_below(fig, ax)
    lines = max(label.count("\n") + 1 for label in shown.values())
    _fit(fig, ax, _GROK_TIMES_WIDTH, max(1.2, len(order) * (0.15 + 0.2 * lines)))
    return _save(fig, path)


_TICK_CHARS = 14
"""Heatmap tick labels wrap at this many characters: a long value widens its cell, not the
figure's margin."""


def _levels(column: pd.Series) -> list[str]:
    """A key's values in sorted order (null last), as labels."""
    return [stats.format_value(v) for v in column.drop_duplicates().sort_values()]


def _ink(ax: plt.Axes, value: float) -> str:
    """Black on a light cell (yellow, grey), white on a dark one (blue, purple)."""
    if not np.isfinite(value) or not ax.collections:
        return "black"  # the grey background of a cell without a median
    mesh = ax.collections[0]
    red, green, blue, _ = mesh.cmap(mesh.norm(value))  # type: ignore[arg-type]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _hatch_not_run(ax: plt.Axes, n_rows: int, n_cols: int, run: set[tuple[int, int]]) -> None:
    """Hatch and label "not run" each cell no run has: never the grey of a cell whose runs
    mostly did not grok (a result), since it has no result at all."""
    from matplotlib.patches import Rectangle

    for i, j in product(range(n_rows), range(n_cols)):
        if (i, j) in run:
            continue
        ax.add_patch(Rectangle((j, i), 1, 1, facecolor="white", edgecolor="0.55", hatch="///",
                               linewidth=0))
        ax.text(j + 0.5, i + 0.5, "not run", ha="center", va="center", fontsize="small",
                color="black", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})


@_paper_style
def grok_heatmap(
    summary: pd.DataFrame,
    x_key: str,
    y_key: str,
    path: Path,
    threshold: float = DEFAULT_GROK_THRESHOLD,
) -> Path:
    """Kaplan-Meier median grok step over two keys (pooled over the others), with k/n grokked.

    Cells where fewer than half of the runs grokked have no median: they are grey, "> steps".
    A pair of values no run had (a grid that did not cross them) is hatched, "not run".
    """
    table = stats.group_summary(summary, [y_key, x_key], threshold=threshold, n_boot=1)
    # Labels, not values, index the grid: a null config value (NaN != NaN) still finds its cell.
    xs, ys = _levels(table[x_key]), _levels(table[y_key])
    km = pd.DataFrame(np.nan, index=ys, columns=xs)
    notes = []
    for r in table.to_dict("records"):
        i, j = ys.index(stats.format_value(r[y_key])), xs.index(stats.format_value(r[x_key]))
        med = r["km_median"]
        km.iloc[i, j] = med
        top = f"{med:,.0f}" if np.isfinite(med) else f"> {r['steps_run_max']:,.0f}"
        notes.append((i, j, f"{top}\n{r['n_grokked']}/{r['n']}"))
    fig, ax = _figure(1.6 + 1.1 * len(xs), 1.4 + 0.8 * len(ys))
    ax.set_facecolor("0.85")
    # Colour on a log scale: grok steps across a sweep span orders of magnitude.
    colour = km.apply(np.log10)
    if colour.notna().to_numpy().any():
        sns.heatmap(colour, ax=ax, cmap="viridis_r", cbar_kws={"label": "log10 KM median"})
    else:  # no cell has a median: a grey grid, no colour bar
        sns.heatmap(colour, ax=ax, vmin=0.0, vmax=1.0, cbar=False)
    for i, j, text in notes:
        ax.text(
            j + 0.5,
            i + 0.5,
            text,
            ha="center",
            va="center",
            fontsize="small",
            color=_ink(ax, float(colour.to_numpy(dtype=float)[i, j])),
        )
    _hatch_not_run(ax, len(ys), len(xs), {(i, j) for i, j, _ in notes})
    x_ticks = [_wrap(x, _TICK_CHARS) for x in xs]
    y_ticks = [_wrap(y, _TICK_CHARS) for y in ys]
    ax.set_xticks(np.arange(len(xs)) + 0.5, x_ticks, rotation=0)
    ax.set_yticks(np.arange(len(ys)) + 0.5, y_ticks, rotation=0)
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    ax.set_title(f"KM median grok step (test acc >= {threshold:g})\nk/n grokked", fontsize="medium")
    y_lines = max(y.count("\n") + 1 for y in y_ticks)
    _fit(fig, ax, max(3.0, 1.1 * len(xs)), max(1.6, len(ys) * max(0.8, 0.2 * y_lines + 0.2)))
    return _save(fig, path)


@_paper_style
def deff_curves(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    by: Sequence[str],
    path: Path,
    threshold: float = DEFAULT_GROK_THRESHOLD,
) -> Path:
    """D_eff per group (median over seeds, band min-max); dashed: the group's median grok
    step, dotted: its median collapse onset."""
    order = _label_order(summary, by)
    colors = _palette(order)
    shown, key_line = _shown_labels(summary, by)
    deff = metrics.dropna(subset=["deff"])
    bands = _bands(_wide(deff, "deff"), summary, by)
    labelled = summary.assign(group=summary["run_id"].map(stats.run_labels(summary, by)))
    title = "D_eff (median over seeds, band min-max)\ndashed: median grok, dotted: collapse"
    fig, axes = _axes(len(order), title, key_line)
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
    return _save(fig, path)


_PANEL_LINES = ("-", "--", ":")
"""Line styles of the columns of one progress panel (stats.PROGRESS_PANELS), in order."""
_PROGRESS_PANEL_SIZE = (2.4, 1.6)
"""Plot area (inches) of each progress_curves panel."""


@_paper_style
def progress_curves(
    metrics: pd.DataFrame, summary: pd.DataFrame, by: Sequence[str], path: Path
) -> Path:
    """The progress measures over training, one panel each (weight norms: whole model solid,
    token embedding dashed, unembedding dotted; logit norm and softmax-collapse share on the
    training split; D_eff on the test split; Nanda et al.'s restricted and excluded losses),
    one colour per group: median over its seeds, band min-max; a run that stopped is held at
    its last value. A panel whose column was never recorded (D_eff without geometry, the
    Nanda losses outside a Transformer on add or sub) says so."""
    order = _label_order(summary, by)
    colors = _palette(order)
    shown, key_line = _shown_labels(summary, by)
    fig, grid = _figure(9, 5.5, nrows=2, ncols=3, sharex=True, squeeze=False)
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
        ax.set_ylabel(_wrap(ylabel, 16))  # at paper type sizes a long label outgrows a panel
        _set_steps(ax, *steps)
    axes[2].set_ylim(-0.02, 1.02)  # a share
    for ax in axes[3:]:
        ax.set_xlabel("step (log)" if steps[0] == "log" else "step")
    _legend_below(fig, axes[0], key_line)
    _fit(fig, axes[0], *_PROGRESS_PANEL_SIZE)
    return _save(fig, path)


def _drawable(times: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times with +inf (a diverged run whose budget is unknown) drawn at the longest finite
    time: the run is censored beyond every step shown, which is what the figure can say."""
    finite = times[np.isfinite(times)]
    edge = float(finite.max()) if finite.size else 1.0
    return np.where(np.isfinite(times), times, edge), censored


@_paper_style
def survival_curves(
    summary: pd.DataFrame, by: Sequence[str], path: Path, threshold: float = DEFAULT_GROK_THRESHOLD
) -> Path:
    """Kaplan-Meier fraction of runs not yet grokked vs step, per group; '|' marks censoring."""
    order = _label_order(summary, by)
    colors = _palette(order)
    shown, key_line = _shown_labels(summary, by)
    fig, ax = _figure(5.5, 4.0)
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
    _legend_below(fig, ax, key_line)
    _fit(fig, ax, *_CURVES_SIZE)
    return _save(fig, path)


def heatmap_keys(by: Sequence[str]) -> tuple[str, str] | None:
    """The two keys of the heatmap: GeomDR's (d*, t_s) when both vary, else the first two."""
    if "geomdr.target_dim" in by and "geomdr.start_step" in by:
        return "geomdr.target_dim", "geomdr.start_step"
    return (by[0], by[1]) if len(by) >= 2 else None


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


@_paper_style
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
    fig, ax = _figure(6.4, 4.0)
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
    return _save(fig, Path(path))
