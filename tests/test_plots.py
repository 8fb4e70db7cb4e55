"""sweepgrok.plots: every figure is written as a readable PNG, including censored edge cases."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from sweepgrok import plots, stats
from sweepgrok.sink import ParquetSink

EVAL = 100


def write_sweep(root: Path, groks: dict[tuple[str, int], list[int | None]]) -> Path:
    """(norm, d*) -> grok step per seed (None = censored at 1000); runs stop after grokking."""
    sink = ParquetSink(root)
    for (norm, dim), steps in groks.items():
        for seed, grok in enumerate(steps):
            run_id = f"{norm}-{dim}-{seed}"
            last = 1000 if grok is None else grok  # stop_after_grok: the run ends at its grok
            rows = [
                {
                    "run_id": run_id,
                    "step": s,
                    "train_acc": min(1.0, 0.2 + s / 300),
                    "test_acc": 1.0 if grok is not None and s >= grok else 0.05,
                    "deff": 30.0 - 20.0 * (grok is not None and s >= grok - 200),
                }
                for s in range(0, last + 1, EVAL)
            ]
            sink.write_metrics(rows)
            cfg = {"model.norm": norm, "geomdr.target_dim": dim, "train.seed": seed}
            sink.write_run({**cfg, "run_id": run_id, "status": "completed", "steps_run": last})
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
    assert names == ["accuracy.png", "grok_times.png", "survival.png", "heatmap.png", "deff.png"]
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
            metrics.assign(deff=float("nan")), summary, ["model.norm"], tmp_path
        )
    }
    assert names == {"accuracy.png", "grok_times.png", "survival.png"}


def test_many_groups_use_panels(
    sweep: tuple[pd.DataFrame, pd.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics, summary = sweep
    monkeypatch.setattr(plots, "_PANELS_ABOVE", 2)  # four groups: small multiples
    by = ["model.norm", "geomdr.target_dim"]
    assert_png(plots.accuracy_curves(metrics, summary, by, tmp_path / "acc.png"))
    assert_png(plots.deff_curves(metrics, summary, by, tmp_path / "deff.png"))


def test_stopped_runs_are_held_at_their_last_value(sweep: tuple[pd.DataFrame, pd.DataFrame]):
    metrics, _ = sweep
    wide = plots._wide(metrics, "test_acc")
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


def test_search_objective_plot_writes_a_png(tmp_path: Path) -> None:
    out = plots.plot_objective(
        [(0, 300.0, False), (1, 1500.0, True)], tmp_path / "o.png", budget=1000
    )
    assert out.stat().st_size > 1000
