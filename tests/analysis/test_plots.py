"""sweepgrok.analysis.plots: every figure is written as a readable PNG (or SVG/PDF), including
censored
edge cases; long labels and many groups never squeeze the plot or fall off the figure."""

from __future__ import annotations

from itertools import product
from pathlib import Path
from typing import Any

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from sweepgrok.analysis import curve_figures, figure_layout, plots, stats
from sweepgrok.analysis.report_content import caption
from sweepgrok.store.sink import ParquetSink

EVAL = 100


def write_run(
    sink: ParquetSink, run_id: str, config: dict[str, Any], grok: int | None, last: int,
    fit_over: int,
) -> None:
    """One run's curves (train accuracy rising over `fit_over` steps, test accuracy and D_eff
    jumping at `grok`; weight norms shrinking, logits and the collapsed share growing) up to
    its last step, then its row."""
    rows = [
        {
            "run_id": run_id,
            "step": s,
            "train_acc": min(1.0, 0.2 + s / fit_over),
            "test_acc": 1.0 if grok is not None and s >= grok else 0.05,
            "deff": 30.0 - 20.0 * (grok is not None and s >= grok - 200),
            "deff_test": 40.0 - 25.0 * (grok is not None and s >= grok),
            "weight_norm": 60.0 - s / 50, "weight_norm_embed": 40.0 - s / 80,
            "weight_norm_unembed": 20.0 - s / 200,
            "logit_norm": 5.0 + s / 20, "collapse_share": min(1.0, s / (4 * fit_over)),
        }
        for s in range(0, last + 1, EVAL)
    ]
    sink.write_metrics(rows)
    sink.write_run({**config, "run_id": run_id, "status": "completed", "steps_run": last})


def write_sweep(root: Path, groks: dict[tuple[str, int], list[int | None]]) -> Path:
    """(norm, d*) -> grok step per seed (None = censored at 1000); runs stop after grokking."""
    sink = ParquetSink(root)
    for (norm, dim), steps in groks.items():
        for seed, grok in enumerate(steps):
            run_id = f"{norm}-{dim}-{seed}"
            last = 1000 if grok is None else grok  # stop_after_grok: the run ends at its grok
            cfg = {"model.norm": norm, "geomdr.target_dim": dim, "train.seed": seed}
            write_run(sink, run_id, cfg, grok, last, fit_over=300)
    sink.flush()
    return root


GROKS: dict[tuple[str, int], list[int | None]] = {
    ("none", 16): [700, None, None],  # under half grok: no KM median, a grey heatmap cell
    ("none", 32): [600, 800, None],
    ("sphere", 16): [200, 300, 300],
    ("sphere", 32): [None, None, None],  # no run groks: a flat survival curve
}


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    metrics, runs = stats.read_sweeps(write_sweep(tmp_path / "s", GROKS))
    return metrics, stats.run_summary(metrics, runs)


def assert_png(path: Path) -> None:
    image = mpimg.imread(path)
    assert path.suffix == ".png" and image.ndim == 3
    assert image.shape[0] > 200 and image.shape[1] > 400
    assert image[..., :3].std() > 0.05  # something was drawn


def test_plot_all_writes_every_figure(sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path):
    metrics, summary = sweep
    by = stats.varying_keys(summary)
    assert by == ["model.norm", "geomdr.target_dim"]
    paths = plots.plot_all(metrics, summary, by, tmp_path / "figs")
    names = [p.name for p in paths]
    assert names == ["accuracy.png", "grok_times.png", "survival.png", "heatmap.png", "deff.png",
                     "progress.png"]
    for p in paths:
        assert_png(p)
    assert plt.get_fignums() == []  # every figure closed: no leak over a long report


def test_one_key_has_no_heatmap_and_no_geometry_no_deff(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path
) -> None:
    metrics, summary = sweep
    names = {
        p.name
        for p in plots.plot_all(
            metrics.assign(deff=float("nan"), logit_norm=float("nan")), summary, ["model.norm"],
            tmp_path,
        )
    }
    assert names == {"accuracy.png", "grok_times.png", "survival.png"}  # nor progress measures


def test_many_groups_use_panels(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics, summary = sweep
    monkeypatch.setattr(figure_layout, "PANELS_ABOVE", 2)  # four groups: small multiples
    by = ["model.norm", "geomdr.target_dim"]
    assert_png(plots.accuracy_curves(metrics, summary, by, tmp_path / "acc.png"))
    assert_png(plots.deff_curves(metrics, summary, by, tmp_path / "deff.png"))


def test_progress_figure_says_what_was_not_recorded(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Geometry off: no test-split D_eff; no restricted loss recorded. Their panels say so; the
    # other four (the excluded loss given here) draw every group.
    metrics, summary = sweep
    seen: dict[str, list[Any]] = {}
    save = figure_layout.save

    def inspect_then_save(fig: Figure, path: Path) -> Path:
        seen["texts"] = [[t.get_text() for t in ax.texts] for ax in fig.axes]
        seen["lines"] = [len(ax.lines) for ax in fig.axes]
        return save(fig, path)

    monkeypatch.setattr(figure_layout, "save", inspect_then_save)
    by = ["model.norm", "geomdr.target_dim"]
    given = metrics.assign(deff_test=float("nan"), excluded_loss=1.0)
    path = plots.progress_curves(given, summary, by, tmp_path / "progress.png")
    assert_png(path)
    assert seen["texts"] == [[], [], [], ["not recorded"], ["not recorded"], []]
    assert seen["lines"] == [3 * 4, 4, 4, 0, 0, 4]  # three weight norms, four groups


def test_every_progress_column_has_a_panel_and_a_line_style() -> None:
    # 2 x 3 panels; a panel draws at most one column per line style.
    assert len(stats.PROGRESS_PANELS) == 6
    panel_lines = curve_figures._PANEL_LINES
    assert all(len(columns) <= len(panel_lines) for _, columns in stats.PROGRESS_PANELS)
    assert set(stats.PROGRESS_COLUMNS) <= set(stats.METRIC_COLUMNS)


def test_stopped_runs_are_held_at_their_last_value(sweep: tuple[pd.DataFrame, pd.DataFrame]):
    metrics, _ = sweep
    wide = curve_figures._wide(metrics, "test_acc")
    # sphere-16-0 grokked and stopped at 200: later steps keep 1.0, not a gap or a drop.
    assert wide.loc[200:, "sphere-16-0"].eq(1.0).all()
    assert wide.loc[1000, "none-16-1"] == 0.05


def test_heatmap_keys_prefer_geomdr_schedule() -> None:
    keys = ["model.norm", "geomdr.start_step", "geomdr.target_dim"]
    assert plots.heatmap_keys(keys) == ("geomdr.target_dim", "geomdr.start_step")
    assert plots.heatmap_keys(["model.norm"]) is None


def test_heatmap_with_null_values_and_no_grokking(tmp_path: Path) -> None:
    summary = pd.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "geomdr.target_dim": [16.0, 32.0, float("nan")],  # a run row without this key
            "geomdr.start_step": [0, 0, 500],
            "grok_step_99": pd.array([None, None, None], dtype="Int64"),
            "delay_99": pd.array([None, None, None], dtype="Int64"),
            "steps_run": pd.array([1000, 1000, 800], dtype="Int64"),
            "collapse_step": pd.array([None, None, None], dtype="Int64"),
            "collapse_to_grok_99": pd.array([None, None, None], dtype="Int64"),
        }
    )
    path = plots.grok_heatmap(summary, "geomdr.target_dim", "geomdr.start_step", tmp_path / "h.png")
    assert_png(path)


def test_a_pair_no_run_had_is_hatched_not_run_not_grey(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sphere x 32 never ran; none x 16 ran and mostly did not grok (grey, "> 1,000").
    groks = {k: v for k, v in GROKS.items() if k != ("sphere", 32)}
    metrics, runs = stats.read_sweeps(write_sweep(tmp_path / "s", groks))
    summary = stats.run_summary(metrics, runs)
    drawn: dict[str, Any] = {}
    save = figure_layout.save

    def keep(fig: Any, path: Path) -> Path:  # what the saved figure shows, then the real save
        ax = fig.axes[0]
        drawn["texts"] = {(t.get_position(), t.get_text()) for t in ax.texts}
        drawn["hatched"] = [p.get_xy() for p in ax.patches if p.get_hatch()]
        return save(fig, path)

    monkeypatch.setattr(figure_layout, "save", keep)
    path = plots.grok_heatmap(summary, "geomdr.target_dim", "model.norm", tmp_path / "heatmap.png")
    assert_png(path)
    # Columns d* 16, 32; rows none, sphere: the cell (row 1, column 1) is sphere x 32.
    assert drawn["hatched"] == [(1, 1)]
    assert ((1.5, 1.5), "not run") in drawn["texts"]
    assert ((0.5, 0.5), "> 1,000\n1/3") in drawn["texts"]  # ran: a result, not "not run"
    assert [text for _, text in drawn["texts"]].count("not run") == 1
    assert "hatched" in caption(path, 0.99) and "not run" in caption(path, 0.99)


def test_search_objective_plot_writes_a_png(tmp_path: Path) -> None:
    out = plots.plot_objective(
        [(0, 300.0, False), (1, 1500.0, True)], tmp_path / "o.png", budget=1000
    )
    assert out.stat().st_size > 1000


LONG_VALUES: dict[str, list[Any]] = {
    "geomdr.layers": ["blocks.0.hook_resid_post", "blocks.0.hook_attn_out+mlp_out"],
    "model.unembed": ["tied_to_embedding", "separate_linear"],
    "optim.warmup_steps": [0, 500, 2000],
}
"""Keys without a short label and long values: group labels of ~90 characters."""


def write_groups(root: Path, n_groups: int) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """n_groups groups over LONG_VALUES, 3 seeds each, one censored run in every other group."""
    sink = ParquetSink(root)
    for g, values in enumerate(list(product(*LONG_VALUES.values()))[:n_groups]):
        for seed in range(3):
            run_id = f"g{g}-{seed}"
            grok = None if (g + seed) % 2 and seed == 2 else 300 + 400 * seed + 100 * g
            last = 3000 if grok is None else grok
            config = {**dict(zip(LONG_VALUES, values, strict=True)), "train.seed": seed}
            write_run(sink, run_id, config, grok, last, fit_over=600)
    sink.flush()
    metrics, runs = stats.read_sweeps(root)
    return metrics, stats.run_summary(metrics, runs), list(LONG_VALUES)


def layout(fig: Figure) -> dict[str, Any]:
    """What the renderer places: the plot area's share of the figure, and whether each legend,
    title and label lies inside the figure (pixels, from a drawn canvas)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    plots_ = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    area = Bbox.union([ax.get_window_extent(renderer) for ax in plots_])
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel] + [ax.title for ax in plots_]
    texts += [ax.xaxis.label for ax in plots_] + [ax.yaxis.label for ax in plots_]
    legends = list(fig.legends) + [ax.get_legend() for ax in plots_ if ax.get_legend()]
    drawn = [t for t in texts if t is not None and t.get_text()] + legends

    slack = page.padded(1)  # a pixel for rounding

    def inside(box: Bbox) -> bool:
        within_x = slack.x0 <= box.x0 and box.x1 <= slack.x1
        return bool(within_x and slack.y0 <= box.y0 and box.y1 <= slack.y1)

    return {
        "width": area.width / page.width,
        "height": area.height / page.height,
        "outside": [str(a) for a in drawn if not inside(a.get_window_extent(renderer))],
        "all_inside": inside(fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)),
        "legends": len(legends),
    }


@pytest.mark.parametrize("n_groups", [1, 12])
def test_long_labels_neither_squeeze_the_plot_nor_fall_off_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_groups: int
) -> None:
    metrics, summary, by = write_groups(tmp_path / "s", n_groups)
    measured: dict[str, dict[str, Any]] = {}
    save = figure_layout.save

    def measure_then_save(fig: Figure, path: Path) -> Path:
        measured[Path(path).stem] = layout(fig)
        return save(fig, path)

    monkeypatch.setattr(figure_layout, "save", measure_then_save)
    plots.plot_all(metrics, summary, by, tmp_path / "figs")
    assert sorted(measured) == ["accuracy", "deff", "grok_times", "heatmap", "progress",
                                "survival"]
    for name, got in measured.items():
        assert got["width"] >= 0.5 and got["height"] >= 0.4, (name, got)
        assert got["outside"] == [] and got["all_inside"], (name, got)
    # One group, or many panels: no legend on the curves; one group per line: one under them.
    assert measured["survival"]["legends"] == 1
    assert measured["grok_times"]["legends"] == (1 if n_groups == 12 else 0)  # censored runs


def test_long_labels_name_their_keys_once_and_wrap() -> None:
    summary = pd.DataFrame({"model.norm": ["none", "sphere"], "optim.warmup_steps": [0, 500]})
    shown, key_line = figure_layout.shown_labels(summary, ["model.norm"])
    assert shown == {"norm=none": "norm=none", "norm=sphere": "norm=sphere"} and key_line == ""
    summary["geomdr.layers"] = ["blocks.0.hook_resid_post", "blocks.0.hook_attn_out+mlp_out"]
    shown, key_line = figure_layout.shown_labels(summary, ["geomdr.layers", "optim.warmup_steps"])
    assert key_line == "geomdr.layers, optim.warmup_steps"
    assert shown["geomdr.layers=blocks.0.hook_resid_post, optim.warmup_steps=0"] == (
        "blocks.0.hook_resid_post, 0"
    )


def test_wrap_breaks_between_names_never_inside_one() -> None:
    assert figure_layout.wrap("blocks.0.hook_resid_post", 14) == "blocks.0.hook_\nresid_post"
    assert figure_layout.wrap("norm=sphere, wd=0", 40) == "norm=sphere, wd=0"
    assert figure_layout.wrap("separate_linear, tied", 10) == "separate_\nlinear,\ntied"
    assert figure_layout.wrap("unbreakablename", 4) == "unbreakablename"


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_vector_figures_are_vectors(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, fmt: str
) -> None:
    metrics, summary = sweep
    by = ["model.norm", "geomdr.target_dim"]
    paths = plots.plot_all(metrics, summary, by, tmp_path, fmt=fmt)
    # accuracy, grok times, survival, heatmap, D_eff, progress
    assert [p.suffix for p in paths] == [f".{fmt}"] * 6
    for p in paths:
        data = p.read_bytes()
        if fmt == "svg":  # text drawn as glyph outlines (svg.fonttype "path"), not <text>
            assert data.startswith(b"<?xml") and b"<svg" in data and b"<path" in data
            assert b"<text" not in data
            # Only a colour bar's gradient is a bitmap (matplotlib's choice: no seams).
            assert data.count(b"<image") == (p.stem == "heatmap")
        else:  # fonts embedded as Type 3 subsets
            assert data.startswith(b"%PDF-") and b"/Type3" in data
    assert plt.get_fignums() == []


def test_vector_figures_are_reproducible(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path
) -> None:
    _, summary = sweep
    by = ["model.norm"]
    first = plots.survival_curves(summary, by, tmp_path / "a.svg").read_bytes()
    assert plots.survival_curves(summary, by, tmp_path / "b.svg").read_bytes() == first


def test_an_unknown_figure_format_is_refused(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path
) -> None:
    _, summary = sweep
    with pytest.raises(ValueError, match="jpg"):
        plots.survival_curves(summary, ["model.norm"], tmp_path / "s.jpg")
    with pytest.raises(ValueError, match="eps"):
        plots.plot_summary_figures(summary, ["model.norm"], tmp_path, fmt="eps")
    assert plt.get_fignums() == []  # the refused figure was closed all the same


def drawn_figure(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """Each figure as handed to figure_layout.save, by file stem (still open: inspect, then it
    is closed)."""
    seen: dict[str, Figure] = {}
    save = figure_layout.save

    def keep(fig: Figure, path: Path) -> Path:
        fig.canvas.draw()
        seen[Path(path).stem] = fig
        return save(fig, path)

    monkeypatch.setattr(figure_layout, "save", keep)
    return seen


def test_a_one_point_group_is_drawn_and_the_axis_fits_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One run grokked at 500, one censored at 1000: a bar marks the lone point, and the axis
    # holds both times with a margin (not the point on the axis' left edge).
    metrics, runs = stats.read_sweeps(
        write_sweep(tmp_path / "s", {("none", 16): [500], ("sphere", 16): [None]})
    )
    seen = drawn_figure(monkeypatch)
    plots.grok_time_distribution(stats.run_summary(metrics, runs), ["model.norm"],
                                 tmp_path / "g.png")
    ax = seen["g"].axes[0]
    bars = [line for line in ax.lines if line.get_gid() == "one"]
    assert len(bars) == 1 and list(bars[0].get_xdata()) == [500]
    left, right = ax.get_xlim()
    span = 1000 - 500
    assert left <= 500 - 0.05 * span and left >= 0  # a margin left of the point
    assert right >= 1000 + 0.05 * span  # and right of the censored marker (room for its note)
    assert ax.get_xscale() == "linear"


def test_the_accuracy_figure_marks_fit_and_grok(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.accuracy_curves(metrics, summary, ["model.norm"], tmp_path / "a.png")
    ax = seen["a"].axes[0]
    marks = {gid: sorted(x for line in ax.lines if line.get_gid() == gid
                         for x in line.get_xdata())
             for gid in ("fit", "grok")}
    # Median grok of the grokked runs: none 700, 600, 800 -> 700; sphere 200, 300, 300 -> 300.
    assert marks["grok"] == [300.0, 700.0]
    # fit = first eval with train acc >= 0.99: 0.2 + s/300 >= 0.99 at s = 300 for every run.
    assert marks["fit"] == [300.0, 300.0]
    assert {"fit", "grok"} <= set(ax.get_legend_handles_labels()[1])


def test_per_run_accuracy_curves_draw_every_run(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.accuracy_curves(metrics, summary, ["model.norm"], tmp_path / "a.png", per_run=True)
    ax = seen["a"].axes[0]
    curves = [line for line in ax.lines if line.get_gid() is None and len(line.get_xdata())]
    assert len(curves) == 2 * 12  # test and train of each of the 12 runs
    assert len([x for line in ax.lines if line.get_gid() == "grok"
                for x in line.get_xdata()]) == 6  # the grokked runs
    assert not ax.collections  # no bands


def test_the_step_axis_is_linear_unless_the_steps_span_a_decade() -> None:
    near = pd.DataFrame({"fit_step": [300, 400], "grok_step_99": [900, None]})
    assert plots.step_axis(near, 1000) == ("linear", (0.0, 1020.0))
    # Evaluations every 50 steps, fits at 250, groks up to 5,600: log, from a quarter of the
    # first fit (not from the first evaluation, nor step 1).
    far = pd.DataFrame({"fit_step": [250, 400], "grok_step_99": [5600, 600]})
    scale, (left, right) = plots.step_axis(far, 5600)
    assert scale == "log" and left == 62.5 and right == pytest.approx(5600 * 1.15)
    assert plots.step_axis(pd.DataFrame({"fit_step": [None]}), 500)[0] == "linear"


def test_text_is_readable_at_a_column_width(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A one-axis figure shrunk to a 3.3-inch column keeps its smallest text at 6 pt or more;
    # the heatmap and the six-panel progress figure at a 7-inch page width.
    metrics, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.plot_all(metrics, summary, ["model.norm", "geomdr.target_dim"], tmp_path)
    for name, fig in seen.items():
        width = 7.0 if name in {"progress", "heatmap"} else 3.3
        sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text().strip()]
        shrink = min(1.0, width / fig.get_figwidth())
        assert min(sizes) * shrink >= 6.0, (name, fig.get_figwidth(), min(sizes))


def visible_lines(ax: plt.Axes) -> list[tuple[str, list[float], list[float]]]:
    """(line style, x, y) of each line drawn with data, in drawing order."""
    return [(str(line.get_linestyle()), [float(x) for x in line.get_xdata()],
             [float(y) for y in line.get_ydata()]) for line in ax.lines if len(line.get_xdata())]


def offsets(ax: plt.Axes) -> list[list[tuple[float, float]]]:
    """The points of each scatter of the axis (a step's y rounded: jitter is seeded)."""
    return [[(float(x), round(float(y), 3)) for x, y in c.get_offsets()]
            for c in ax.collections if type(c).__name__ == "PathCollection"]


def test_the_deff_figure_draws_each_group_and_its_median_grok_and_collapse(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.deff_curves(metrics, summary, ["model.norm"], tmp_path / "d.png")
    fig = seen["d"]
    ax = fig.axes[0]
    assert fig._suptitle.get_text() == (
        "D_eff (median over seeds, band min-max)\ndashed: median grok, dotted: collapse"
    )
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_xscale()) == (
        "step", "D_eff (participation ratio)", "linear")
    # none: median grok of 700, 600, 800 = 700, collapse of 500, 400, 600 = 500; sphere: grok
    # 300 (200, 300, 300), no collapse recorded: no dotted line.
    marks = [(ls, xs[0]) for ls, xs, _ in visible_lines(ax) if ls in ("--", ":")]
    assert marks == [("--", 700.0), (":", 500.0), ("--", 300.0)]
    bands = [ys for ls, _, ys in visible_lines(ax) if ls == "-"]
    assert len(bands) == 2 and len(ax.collections) == 2  # a median line and a band per group
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["norm=none", "norm=sphere"]


def test_the_survival_figure_steps_down_at_each_grok_and_ticks_the_censored(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.survival_curves(summary, ["model.norm"], tmp_path / "s.png")
    ax = seen["s"].axes[0]
    assert ax.get_title() == "Kaplan-Meier survival\ngrok = test acc >= 0.99; | = censored"
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_ylim()) == (
        "step", "fraction not yet grokked", (-0.02, 1.02))
    none, none_ticks, sphere, sphere_ticks = visible_lines(ax)
    # none groks at 600, 700, 800 (3 of 6), sphere at 200, 300, 300; 3 censored at 1,000 each.
    assert none[1] == [0.0, 600.0, 700.0, 800.0, 1000.0, 1000.0]
    assert none[2] == pytest.approx([1.0, 5 / 6, 4 / 6, 0.5, 0.5, 0.5])
    assert sphere[1:] == ([0.0, 200.0, 300.0, 1000.0, 1000.0],
                          pytest.approx([1.0, 5 / 6, 0.5, 0.5, 0.5]))
    assert none_ticks[1:] == sphere_ticks[1:] == ([1000.0] * 3, [0.5] * 3)
    assert [t.get_text() for t in seen["s"].legends[0].get_texts()] == [
        "norm=none (n=6)", "norm=sphere (n=6)"]


def test_the_grok_times_figure_draws_boxes_points_and_censored_runs(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.grok_time_distribution(summary, ["model.norm"], tmp_path / "g.png")
    ax = seen["g"].axes[0]
    assert ax.get_title() == "Grok step per group (6/12 grokked)"
    assert ax.get_xlabel() == "grok step (test acc >= 0.99)" and ax.get_xscale() == "linear"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["norm=none", "norm=sphere"]
    assert len(ax.patches) == 2  # a box per group
    grokked_none, censored_none, grokked_sphere, censored_sphere = offsets(ax)
    assert [x for x, _ in grokked_none] == [700.0, 600.0, 800.0]
    assert [x for x, _ in grokked_sphere] == [200.0, 300.0, 300.0]
    assert censored_none == [(1000.0, 0.0)] * 3 and censored_sphere == [(1000.0, 1.0)] * 3
    assert [t.get_text() for t in ax.texts] == [" 3 censored", " 3 censored"]
    assert [t.get_text() for t in seen["g"].legends[0].get_texts()] == [
        "censored (grok step > steps run)"]


def test_the_heatmap_writes_each_cell_s_median_and_share_grokked(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.grok_heatmap(summary, "geomdr.target_dim", "model.norm", tmp_path / "h.png")
    ax, bar = seen["h"].axes
    assert ax.get_title() == "KM median grok step (test acc >= 0.99)\nk/n grokked"
    assert (ax.get_xlabel(), ax.get_ylabel(), bar.get_ylabel()) == (
        "geomdr.target_dim", "model.norm", "log10 KM median")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "32"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["none", "sphere"]
    assert [(t.get_position(), t.get_text()) for t in ax.texts] == [
        ((0.5, 0.5), "> 1,000\n1/3"), ((1.5, 0.5), "800\n2/3"),
        ((0.5, 1.5), "300\n3/3"), ((1.5, 1.5), "> 1,000\n0/3")]
    assert not [p for p in ax.patches if p.get_hatch()]  # every pair ran


def test_the_accuracy_figure_names_its_axes_and_groups(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics, summary = sweep
    seen = drawn_figure(monkeypatch)
    plots.accuracy_curves(metrics, summary, ["model.norm"], tmp_path / "a.png")
    fig = seen["a"]
    ax = fig.axes[0]
    assert fig._suptitle.get_text() == (
        "Accuracy (median over seeds, band min-max)\ntest solid, train dashed")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_ylim()) == ("step", "accuracy", (-0.02, 1.02))
    assert [ls for ls, _, _ in visible_lines(ax)] == ["-", "None", "--", "None"] * 2
    assert len(ax.collections) == 4  # a test and a train band per group
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "norm=none", "norm=sphere", "fit", "grok"]


def test_the_objective_figure_draws_trials_best_so_far_and_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = drawn_figure(monkeypatch)
    values = [(0, 300.0, False), (1, 1500.0, True), (2, 200.0, False)]
    plots.plot_objective(values, tmp_path / "o.png", budget=1000, title="search")
    ax = seen["o"].axes[0]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == (
        "search", "trial", "objective (steps)")
    assert offsets(ax) == [[(0.0, 300.0), (2.0, 200.0)], [(1.0, 1500.0)]]  # grokked, censored
    assert visible_lines(ax) == [("-", [0.0, 1.0, 2.0], [300.0, 300.0, 200.0]),
                                 ("--", [0.0, 1.0], [1000.0, 1000.0])]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "grokked (median step)", "censored (capped, or > budget)", "best so far", "budget 1000"]
    plots.plot_objective(values, tmp_path / "m.png", budget=1000, mode="max")
    assert visible_lines(seen["m"].axes[0])[0][2] == [300.0, 1500.0, 1500.0]
