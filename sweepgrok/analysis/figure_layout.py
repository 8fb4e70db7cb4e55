"""What every figure shares: the file it is written to (PNG, SVG or PDF), the paper's type
sizes, and the layout (the only place that sets matplotlib's backend and makes figures).

The Agg backend is forced: analysis runs on laptops and headless servers alike, never needing a
display.

Layout: labels, titles and legends take their room from the figure, never from the plot. Every
figure uses matplotlib's constrained layout, legends sit below the axes, long group labels drop
their key names (named once, in the legend's title) and wrap, and the figure grows until each
plot area has the size it was given (``fit``). The figures themselves are drawn by
curve_figures, distribution_figures and heatmap_figure; plots names them all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from sweepgrok.analysis import stats
from sweepgrok.analysis.labels import key_labels
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


def paper_style(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run a figure function under _PAPER_RC (fonts are fixed when a text is made, so the
    whole drawing, not only the save, needs it)."""

    @functools.wraps(draw)
    def styled(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with matplotlib.rc_context(_PAPER_RC):  # type: ignore[arg-type]
            return draw(*args, **kwargs)

    return styled


def save(fig: Figure, path: Path) -> Path:
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


def figure(width: float, height: float, **kw: Any) -> tuple[Figure, Any]:
    """plt.subplots with constrained layout (titles, labels, colour bars, legends placed
    "outside" all get room without overlapping)."""
    return plt.subplots(figsize=(width, height), layout="constrained", **kw)


def fit(fig: Figure, ax: plt.Axes, width: float, height: float) -> None:
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


LABEL_CHARS = 40
"""Longer group labels drop their key names (named once, in a legend title) and wrap."""


_BREAK_AFTER = re.compile(r"(?<=[\s_.+/])")
"""Where a label may break: after a space, or inside a name after '_', '.', '+' or '/'."""


def wrap(text: str, width: int) -> str:
    """`text` on lines of at most `width` characters where it can break (a longer piece stays
    whole): "blocks.0.hook_resid_post" wraps as "blocks.0.hook_" "resid_post", not mid-word."""
    lines = [""]
    for piece in _BREAK_AFTER.split(text):
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.strip() for line in lines)


def shown_labels(summary: pd.DataFrame, by: Sequence[str]) -> tuple[dict[str, str], str]:
    """Group label -> the label drawn, and the key line that names the keys when they are dropped.

    Short labels are drawn whole ("norm=sphere, wd=0"). Long ones keep only the values
    ("spherical, 0"), the key line ("norm, wd") says once what they are, and they wrap.
    """
    groups = [values for values, _ in stats.iter_groups(summary, by)]
    full = [stats.group_label(by, values) for values in groups]
    if max(map(len, full), default=0) <= LABEL_CHARS:
        return dict(zip(full, full, strict=True)), ""
    short = [", ".join(stats.format_value(v) for v in values) for values in groups]
    shown = [wrap(label, LABEL_CHARS) for label in short]
    return dict(zip(full, shown, strict=True)), ", ".join(key_labels(by))


_CHAR_INCHES = 0.075
"""Width of a character of a small legend entry, for a first guess of how many columns fit."""


def legend_below(fig: Figure, ax: plt.Axes, title: str = "") -> None:
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


PANELS_ABOVE = 6
"""More groups than this: one small panel per group instead of one crowded axis."""
_MAX_PANELS = 36


def palette(labels: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    # tab10 repeats after ten colours; husl stays distinct for many groups.
    name = "tab10" if len(labels) <= 10 else "husl"
    return dict(zip(labels, sns.color_palette(name, len(labels)), strict=True))


def label_order(summary: pd.DataFrame, by: Sequence[str]) -> list[str]:
    """The groups' labels in the order of stats.iter_groups (the tables' order)."""
    return [stats.group_label(by, values) for values, _ in stats.iter_groups(summary, by)]


CURVES_SIZE = (4.4, 2.8)
"""Plot area (inches) of a figure with one axis: with its labels about 5.5 inches wide, a
column's width at 60% (see _PAPER_RC)."""


def group_axes(n_groups: int, title: str, key_line: str) -> tuple[Figure, list[plt.Axes]]:
    """One wide axis for a few groups; a grid of small shared panels for many (the key line
    under the title names the keys of panel titles that show values only)."""
    if n_groups <= PANELS_ABOVE:
        fig, ax = figure(5.5, 4.0)
        fig.suptitle(title)
        return fig, [ax]
    ncols = min(5, n_groups)
    nrows = -(-min(n_groups, _MAX_PANELS) // ncols)
    fig, grid = figure(
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

