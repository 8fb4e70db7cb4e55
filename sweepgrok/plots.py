"""Figures of a sweep, written as PNG files (the only module that imports seaborn/matplotlib).

Every function takes the frames of sweepgrok.stats (metrics rows, the run summary), or a search's
trial values (``plot_objective``), and a path, writes one PNG and returns its path. The Agg
backend is forced: analysis runs on laptops and headless servers alike, never needing a display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from scipy import stats as sps

from sweepgrok import stats

_DPI = 120


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


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


def _axes(n_groups: int, title: str) -> tuple[Figure, list[plt.Axes]]:
    """One wide axis for a few groups; a grid of small shared panels for many."""
    if n_groups <= _PANELS_ABOVE:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        fig.suptitle(title)
        return fig, [ax]
    ncols = min(5, n_groups)
    nrows = -(-min(n_groups, _MAX_PANELS) // ncols)
    fig, grid = plt.subplots(
        nrows,
        ncols,
        figsize=(3.2 * ncols, 2.4 * nrows + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    axes = list(grid.ravel())
    for ax in axes[n_groups:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, axes


def _log_steps(ax: plt.Axes) -> None:
    ax.set_xscale("log")
    ax.grid(True, which="major", alpha=0.3)


def _finish_curves(fig: Figure, axes: list[plt.Axes], ylabel: str, single: bool) -> None:
    for ax in axes:
        _log_steps(ax)
    if single:
        axes[0].set_xlabel("step (log)")
        axes[0].set_ylabel(ylabel)
        if axes[0].get_legend_handles_labels()[0]:  # a sweep without metrics draws none
            axes[0].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        fig.supxlabel("step (log)")
        fig.supylabel(ylabel)


def _draw_band(ax: plt.Axes, band: pd.DataFrame, color: Any, label: str | None, **kw: Any) -> None:
    ax.plot(band.index, band["median"], color=color, label=label, **kw)
    ax.fill_between(band.index, band["min"], band["max"], color=color, alpha=0.2, lw=0)


def accuracy_curves(
    metrics: pd.DataFrame, summary: pd.DataFrame, by: Sequence[str], path: Path
) -> Path:
    """Test (solid) and train (dashed) accuracy per group on a log step axis: median over the
    group's seeds, band min-max; a run that stopped is held at its last value."""
    order = _label_order(summary, by)
    colors = _palette(order)
    test = _bands(_wide(metrics, "test_acc"), summary, by)
    train = _bands(_wide(metrics, "train_acc"), summary, by)
    title = "Accuracy: test solid, train dashed (median over seeds, band min-max)"
    fig, axes = _axes(len(order), title)
    single = len(axes) == 1
    for i, label in enumerate(order if single else order[: len(axes)]):
        ax = axes[0] if single else axes[i]
        if label in test:
            _draw_band(ax, test[label], colors[label], label)
        if label in train:
            _draw_band(ax, train[label], colors[label], None, ls="--", lw=1)
        if not single:
            ax.set_title(label, fontsize="small")
    for ax in axes:
        ax.set_ylim(-0.02, 1.02)
    _finish_curves(fig, axes, "accuracy", single)
    return _save(fig, path)


def grok_time_distribution(
    summary: pd.DataFrame, by: Sequence[str], path: Path, threshold: float = 0.99
) -> Path:
    """Grok steps per group (box + jittered points); censored runs as red '>' at their steps
    run (their grok step is larger)."""
    order = _label_order(summary, by)
    groups = list(stats.iter_groups(summary, by))
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.5 * len(order)))
    rng = np.random.default_rng(0)  # jitter only; seeded so figures are reproducible
    n_grokked = n_censored = 0
    for y, (_, rows) in enumerate(groups):
        times, censored = _drawable(*stats.times_and_censoring(rows, threshold))
        grok, cens = times[~censored], times[censored]
        n_grokked, n_censored = n_grokked + grok.size, n_censored + cens.size
        if grok.size:
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
            ax.scatter(grok, y + rng.uniform(-0.15, 0.15, grok.size), s=18, color="C0", zorder=3)
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
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(len(order) - 0.5, -0.5)  # first group on top, as in the table
    all_times = _drawable(*stats.times_and_censoring(summary, threshold))[0]
    log = bool(all_times.size) and all_times.max() > 20 * max(all_times.min(), 1.0)
    if log:
        ax.set_xscale("log")
    if n_censored:  # room for the "n censored" notes right of the markers
        ax.set_xlim(right=float(all_times.max()) * (2.5 if log else 1.3))
    ax.set_xlabel(f"grok step (test acc >= {threshold:g})")
    ax.grid(True, axis="x", alpha=0.3)
    if n_censored:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Grok time per group ({n_grokked}/{n_grokked + n_censored} grokked)")
    return _save(fig, path)


def _levels(column: pd.Series) -> list[str]:
    """A key's values in sorted order (null last), as labels."""
    return [stats.format_value(v) for v in column.drop_duplicates().sort_values()]


def grok_heatmap(
    summary: pd.DataFrame, x_key: str, y_key: str, path: Path, threshold: float = 0.99
) -> Path:
    """Kaplan-Meier median grok step over two keys (pooled over the others), with k/n grokked.

    Cells where fewer than half of the runs grokked have no median: they are grey, "> steps".
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
        notes.append((i, j, f"{top}\n{r['n_grokked']}/{r['n']}", bool(np.isfinite(med))))
    fig, ax = plt.subplots(figsize=(1.6 + 1.1 * len(xs), 1.4 + 0.8 * len(ys)))
    ax.set_facecolor("0.85")
    # Colour on a log scale: grok steps across a sweep span orders of magnitude.
    colour = km.apply(np.log10)
    if colour.notna().to_numpy().any():
        sns.heatmap(colour, ax=ax, cmap="viridis_r", cbar_kws={"label": "log10 KM median"})
    else:  # no cell has a median: a grey grid, no colour bar
        sns.heatmap(colour, ax=ax, vmin=0.0, vmax=1.0, cbar=False)
    for i, j, text, finite in notes:
        ax.text(
            j + 0.5,
            i + 0.5,
            text,
            ha="center",
            va="center",
            fontsize="small",
            color="white" if finite else "black",
        )
    ax.set_xticks(np.arange(len(xs)) + 0.5, xs)
    ax.set_yticks(np.arange(len(ys)) + 0.5, ys, rotation=0)
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    ax.set_title(f"KM median grok step (test acc >= {threshold:g}); k/n grokked")
    return _save(fig, path)


def deff_curves(
    metrics: pd.DataFrame,
    summary: pd.DataFrame,
    by: Sequence[str],
    path: Path,
    threshold: float = 0.99,
) -> Path:
    """D_eff per group (median over seeds, band min-max); dashed: the group's median grok
    step, dotted: its median collapse onset."""
    order = _label_order(summary, by)
    colors = _palette(order)
    bands = _bands(_wide(metrics.dropna(subset=["deff"]), "deff"), summary, by)
    labelled = summary.assign(group=summary["run_id"].map(stats.run_labels(summary, by)))
    title = "D_eff (median over seeds, band min-max); dashed: median grok, dotted: collapse"
    fig, axes = _axes(len(order), title)
    single = len(axes) == 1
    for i, label in enumerate(order if single else order[: len(axes)]):
        ax = axes[0] if single else axes[i]
        if label in bands:
            _draw_band(ax, bands[label], colors[label], label)
        rows = labelled[labelled["group"] == label]
        for col, ls in ((f"grok_step_{stats.tag(threshold)}", "--"), ("collapse_step", ":")):
            step = rows[col].dropna()
            if len(step):
                ax.axvline(float(step.median()), color=colors[label], ls=ls, lw=1.2)
        if not single:
            ax.set_title(label, fontsize="small")
    _finish_curves(fig, axes, "D_eff (participation ratio)", single)
    return _save(fig, path)


def _drawable(times: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times with +inf (a diverged run whose budget is unknown) drawn at the longest finite
    time: the run is censored beyond every step shown, which is what the figure can say."""
    finite = times[np.isfinite(times)]
    edge = float(finite.max()) if finite.size else 1.0
    return np.where(np.isfinite(times), times, edge), censored


def survival_curves(
    summary: pd.DataFrame, by: Sequence[str], path: Path, threshold: float = 0.99
) -> Path:
    """Kaplan-Meier fraction of runs not yet grokked vs step, per group; '|' marks censoring."""
    order = _label_order(summary, by)
    colors = _palette(order)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for (_, rows), label in zip(stats.iter_groups(summary, by), order, strict=True):
        times, censored = _drawable(*stats.times_and_censoring(rows, threshold))
        data = sps.CensoredData(uncensored=times[~censored], right=times[censored])
        sf = sps.ecdf(data).sf
        x = np.r_[0.0, sf.quantiles, times.max()]
        y = np.r_[1.0, sf.probabilities, sf.probabilities[-1]]
        ax.step(x, y, where="post", color=colors[label], label=f"{label} (n={len(rows)})")
        ct = times[censored]
        ax.plot(ct, sf.evaluate(ct), "|", color=colors[label], ms=10, mew=1.5)
    ax.set_xlabel("step")
    ax.set_ylabel("fraction not yet grokked")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Kaplan-Meier survival (grok = test acc >= {threshold:g}; | = censored)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
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
    threshold: float = 0.99,
) -> list[Path]:
    """Every figure that applies (heatmap: two or more keys; D_eff: geometry recorded)."""
    out = Path(out_dir)
    paths = [accuracy_curves(metrics, summary, by, out / "accuracy.png")]
    paths += plot_summary_figures(summary, by, out, threshold)
    if "deff" in metrics and metrics["deff"].notna().any():
        paths.append(deff_curves(metrics, summary, by, out / "deff.png", threshold))
    return paths


def plot_summary_figures(
    summary: pd.DataFrame, by: Sequence[str], out_dir: Path, threshold: float = 0.99
) -> list[Path]:
    """The figures a run summary alone carries (no metrics/): grok times, survival, heatmap."""
    out = Path(out_dir)
    paths = [
        grok_time_distribution(summary, by, out / "grok_times.png", threshold),
        survival_curves(summary, by, out / "survival.png", threshold),
    ]
    keys = heatmap_keys(by)
    if keys is not None:
        paths.append(grok_heatmap(summary, keys[0], keys[1], out / "heatmap.png", threshold))
    return paths


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
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
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
