"""The heatmap of the Kaplan-Meier median grok step over two keys, and which two keys it takes.
It takes the run summary of sweepgrok.analysis.stats and a path, and returns the path it wrote
(figure_layout.save).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes

from sweepgrok.analysis import figure_layout as layout
from sweepgrok.analysis import stats
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD

_TICK_CHARS = 14
"""Heatmap tick labels wrap at this many characters: a long value widens its cell, not the
figure's margin."""


def _levels(column: pd.Series) -> list[str]:
    """A key's values in sorted order (null last), as labels."""
    return [stats.format_value(v) for v in column.drop_duplicates().sort_values()]


def _ink(ax: Axes, value: float) -> str:
    """Black on a light cell (yellow, grey), white on a dark one (blue, purple)."""
    if not np.isfinite(value) or not ax.collections:
        return "black"  # the grey background of a cell without a median
    mesh = ax.collections[0]
    red, green, blue, _ = mesh.cmap(mesh.norm(value))  # type: ignore[arg-type]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _hatch_not_run(ax: Axes, n_rows: int, n_cols: int, run: set[tuple[int, int]]) -> None:
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


@layout.paper_style
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
    fig, ax = layout.figure(1.6 + 1.1 * len(xs), 1.4 + 0.8 * len(ys))
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
    x_ticks = [layout.wrap(x, _TICK_CHARS) for x in xs]
    y_ticks = [layout.wrap(y, _TICK_CHARS) for y in ys]
    ax.set_xticks(np.arange(len(xs)) + 0.5, x_ticks, rotation=0)
    ax.set_yticks(np.arange(len(ys)) + 0.5, y_ticks, rotation=0)
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    ax.set_title(f"KM median grok step (test acc >= {threshold:g})\nk/n grokked", fontsize="medium")
    y_lines = max(y.count("\n") + 1 for y in y_ticks)
    layout.fit(fig, ax, max(3.0, 1.1 * len(xs)), max(1.6, len(ys) * max(0.8, 0.2 * y_lines + 0.2)))
    return layout.save(fig, path)


def heatmap_keys(by: Sequence[str]) -> tuple[str, str] | None:
    """The two keys of the heatmap: GeomDR's (d*, t_s) when both vary, else the first two."""
    if "geomdr.target_dim" in by and "geomdr.start_step" in by:
        return "geomdr.target_dim", "geomdr.start_step"
    return (by[0], by[1]) if len(by) >= 2 else None


