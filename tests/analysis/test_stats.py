"""sweepgrok.analysis.stats on hand-built sweeps written as real Parquet through ParquetSink."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweepgrok.analysis import comparisons, stats, survival
from sweepgrok.store.sink import ParquetSink


def write_run(
    sink: ParquetSink,
    run_id: str,
    test: Sequence[float],
    train: Sequence[float] | None = None,
    deff: Sequence[float] | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    steps_run: int | None = None,
    status: str = "completed",
    eval_every: int = 100,
) -> None:
    """One run: evaluations at 0, eval_every, ... with the given accuracies, then its run row."""
    rows = [
        {
            "run_id": run_id,
            "step": i * eval_every,
            "train_acc": 1.0 if train is None else train[i],
            "test_acc": acc,
            "deff": None if deff is None else deff[i],
        }
        for i, acc in enumerate(test)
    ]
    sink.write_metrics(rows)
    last = (len(test) - 1) * eval_every
    row = {"run_id": run_id, "status": status, "steps_run": steps_run or last}
    sink.write_run({**row, **(config or {})})


def step_curve(grok_at: int | None, n_evals: int, eval_every: int = 100) -> list[float]:
    """Test accuracy 0.1 until step `grok_at`, then 1.0 (never when grok_at is None)."""
    return [
        1.0 if grok_at is not None and i * eval_every >= grok_at else 0.1 for i in range(n_evals)
    ]


@pytest.fixture
def crafted(tmp_path: Path) -> pd.DataFrame:
    sink = ParquetSink(tmp_path)
    cfg = {"model.norm": "none"}
    # fit at 100, crosses 0.95 at 200 and 0.99 at 300; D_eff peaks at 20 and halves at 300.
    write_run(
        sink,
        "fast",
        test=[0.0, 0.3, 0.96, 0.992, 1.0, 1.0],
        train=[0.2, 0.995, 1.0, 1.0, 1.0, 1.0],
        deff=[10.0, 20.0, 15.0, 9.0, 5.0, 5.0],
        config=cfg,
    )
    # crosses 0.95 at 300 but never 0.99.
    write_run(sink, "only95", test=[0.0, 0.5, 0.9, 0.951, 0.97, 0.96], config=cfg)
    # never groks; ran 600 steps although its last evaluation was at 500.
    write_run(sink, "never", test=[0.0, 0.2, 0.4, 0.5, 0.3, 0.2], config=cfg, steps_run=600)
    # float32 accuracy 0.98999995 is 0.99 (k / n_test rounded), not a miss.
    write_run(sink, "f32", test=[0.0, 0.5, 0.98999995, 1.0], config=cfg)
    sink.flush()
    return stats.summarize_sweeps(tmp_path).set_index("run_id")


def test_fit_grok_delay_on_crafted_curves(crafted: pd.DataFrame) -> None:
    fast = crafted.loc["fast"]
    assert (fast["fit_step"], fast["grok_step_95"], fast["grok_step_99"]) == (100, 200, 300)
    assert (fast["delay_95"], fast["delay_99"]) == (100, 200)
    assert not fast["censored_95"] and not fast["censored_99"]
    assert fast["peak_test_acc"] == 1.0 and fast["steps_run"] == 500
    assert fast["collapse_step"] == 300  # 9 < 0.5 * running max 20
    assert fast["collapse_to_grok_99"] == 0 and fast["collapse_to_grok_95"] == -100


def test_run_crossing_095_but_not_099_is_censored_only_at_099(crafted: pd.DataFrame) -> None:
    run = crafted.loc["only95"]
    assert run["grok_step_95"] == 300 and not run["censored_95"]
    assert pd.isna(run["grok_step_99"]) and run["censored_99"] and pd.isna(run["delay_99"])
    assert run["peak_test_acc"] == pytest.approx(0.97)


def test_run_that_never_groks_is_censored_at_steps_run(crafted: pd.DataFrame) -> None:
    run = crafted.loc["never"]
    assert run["censored_95"] and run["censored_99"]
    assert pd.isna(run["grok_step_95"]) and pd.isna(run["collapse_step"])
    assert run["steps_run"] == 600  # runs/ steps_run beats the last evaluation (500)
    times, censored = stats.times_and_censoring(crafted.loc[["never"]], 0.99)
    assert times.tolist() == [600.0] and censored.tolist() == [True]


def test_float32_rounded_accuracy_counts(crafted: pd.DataFrame) -> None:
    assert crafted.loc["f32", "grok_step_99"] == 200


def test_unsorted_frame_gives_the_same_events(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    write_run(sink, "a", [0.0, 0.96, 1.0, 1.0], deff=[4.0, 10.0, 3.0, 2.0])
    write_run(sink, "b", [0.0, 0.2, 0.99, 0.5], deff=[9.0, 8.0, 7.0, 1.0])
    metrics, _ = stats.read_sweeps(tmp_path)
    shuffled = metrics.sample(frac=1.0, random_state=1)  # e.g. pd.read_parquet of a folder
    pd.testing.assert_frame_equal(stats.run_events(metrics), stats.run_events(shuffled))
    assert stats.run_events(shuffled).loc["a", "collapse_step"] == 200


def test_a_repeat_is_the_same_config_and_seed_however_it_ran(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Folder b repeats a's seed 0 on another device and thread count (the same experiment),
    # and holds seed 1 and a run at another learning rate (other experiments).
    a, b = ParquetSink(tmp_path / "a"), ParquetSink(tmp_path / "b")
    base = {"model.norm": "none", "optim.lr": 0.001, "train.seed": 0, "train.device": "cpu"}
    write_run(a, "a-0", [0.1, 1.0], config=base)
    write_run(b, "b-0", [0.1, 0.1], config={**base, "train.device": "cuda", "train.threads": 4})
    write_run(b, "b-1", [0.1, 1.0], config={**base, "train.seed": 1})
    write_run(b, "b-lr", [0.1, 1.0], config={**base, "optim.lr": 0.01})
    logger = logging.getLogger("sweepgrok")  # the CLI's setup stops it propagating to caplog's
    logger.addHandler(caplog.handler)
    try:
        metrics, runs = stats.read_sweeps([tmp_path / "a", tmp_path / "b"])
    finally:
        logger.removeHandler(caplog.handler)
    assert runs["run_id"].tolist() == ["a-0", "b-1", "b-lr"]  # the first folder given keeps it
    assert "b-0" not in set(metrics["run_id"])
    assert "left out 1 run(s)" in caplog.text and f"1 from {tmp_path / 'b'}" in caplog.text
    _, kept = stats.read_sweeps([tmp_path / "b", tmp_path / "a"])
    assert kept["run_id"].tolist() == ["b-0", "b-1", "b-lr"]
    _, every = stats.read_sweeps([tmp_path / "a", tmp_path / "b"], keep_repeats=True)
    assert len(every) == 4


def test_percent_accuracies_are_refused() -> None:
    metrics = pd.DataFrame(
        {"run_id": ["a", "a"], "step": [0, 100], "train_acc": [50.0, 99.0], "test_acc": [1, 2.0]}
    )
    with pytest.raises(stats.AnalysisError, match="percent"):
        stats.run_events(metrics)


@pytest.fixture
def censored_group(tmp_path: Path) -> pd.DataFrame:
    """Five runs: grok at 200, 400, 600; censored at 500 and 800 (budgets differ)."""
    sink = ParquetSink(tmp_path)
    for i, (grok, n_evals) in enumerate([(200, 9), (400, 9), (None, 6), (600, 9), (None, 9)]):
        cfg = {"model.norm": "none", "train.seed": i}
        write_run(sink, f"r{i}", step_curve(grok, n_evals), config=cfg)
    return stats.summarize_sweeps(tmp_path)


def test_success_rate_wilson_and_kaplan_meier_by_hand(censored_group: pd.DataFrame) -> None:
    row = stats.group_summary(censored_group, threshold=0.99).iloc[0]
    assert row["label"] == "all runs"  # only the seed varies, and seeds are replicates
    assert (row["n"], row["n_grokked"], row["success_rate"]) == (5, 3, 0.6)
    # Wilson, z = 1.959964: centre (0.6 + z^2/10) / (1 + z^2/5) = 0.98415 / 1.76829 = 0.55655;
    # half-width z * sqrt(0.6 * 0.4 / 5 + z^2 / 100) / 1.76829 = 0.32583.
    assert row["success_lo"] == pytest.approx(0.23072, abs=1e-4)
    assert row["success_hi"] == pytest.approx(0.88238, abs=1e-4)
    # Kaplan-Meier, times 200e 400e 500c 600e 800c (e = grokked, c = censored):
    # S(200) = 4/5 = 0.8; S(400) = 0.8 * 3/4 = 0.6; 500 leaves the risk set (2 remain);
    # S(600) = 0.6 * 1/2 = 0.3 <= 0.5, so the KM median is 600.
    assert row["km_median"] == 600
    # Among grokked runs only: median and mean 400; sem = std(ddof=1) / sqrt(3) = 200 / sqrt 3.
    assert row["grok_median"] == 400 and row["grok_mean"] == 400
    assert row["grok_sem"] == pytest.approx(200 / np.sqrt(3))
    assert row["grok_min"] == 200 and row["grok_max"] == 600 and row["steps_run_max"] == 800
    assert row["grok_median_lo"] <= 400 <= row["grok_median_hi"]


def test_km_median_is_nan_when_under_half_grok() -> None:
    times = np.array([100.0, 1000.0, 1000.0])
    assert np.isnan(stats.km_median(times, np.array([False, True, True])))
    assert np.isnan(stats.km_median(times, np.array([True, True, True])))
    assert stats.km_median(times, np.array([False, False, True])) == 1000


def test_sem_divides_by_sqrt_n() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert stats.sem(x) == pytest.approx(np.std(x, ddof=1) / 2.0)
    assert np.isnan(stats.sem(np.array([5.0])))


def test_wilson_interval_at_zero_successes() -> None:
    lo, hi = stats.wilson_interval(0, 10)
    assert lo == 0.0 and 0.0 < hi < 0.35


def test_bootstrap_is_seeded() -> None:
    x = np.arange(20.0)
    assert stats.bootstrap_ci(x, seed=3) == stats.bootstrap_ci(x, seed=3)
    est, lo, hi = stats.bootstrap_ci(x, np.mean)
    assert est == 9.5 and lo < 9.5 < hi


def synthetic_summary(ratio: float, n: int = 40, seed: int = 0) -> pd.DataFrame:
    """Two groups, log-normal grok steps, medians 4000 (baseline) and 4000 / ratio."""
    rng = np.random.default_rng(seed)
    base = 4000 * np.exp(rng.normal(0, 0.3, n))
    fast = 4000 / ratio * np.exp(rng.normal(0, 0.3, n))
    return pd.DataFrame(
        {
            "run_id": [f"r{i}" for i in range(2 * n)],
            "model.norm": ["none"] * n + ["sphere"] * n,
            "grok_step_99": pd.array(np.round(np.r_[base, fast]).astype(int), dtype="Int64"),
            "delay_99": pd.array([pd.NA] * (2 * n), dtype="Int64"),
            "steps_run": pd.array(np.round(np.r_[base, fast]).astype(int), dtype="Int64"),
        }
    )


def test_speedup_ci_covers_the_true_ratio() -> None:
    summary = synthetic_summary(ratio=4.0)
    cmp = comparisons.compare(summary, "model.norm=none").set_index("model.norm")
    fast = cmp.loc["sphere"]
    assert fast["speedup_lo"] < 4.0 < fast["speedup_hi"]
    assert fast["speedup_lo"] > 2.0  # and the interval is informative
    assert fast["p_asymptotic"] < 1e-6
    # 40 vs 40 has C(80, 40) relabellings: a Monte Carlo of 10,000, none as extreme.
    assert not fast["p_exact"] and fast["p"] == pytest.approx(1 / 10_001)
    assert cmp.loc["none", "is_baseline"] and cmp.loc["none", "speedup"] == 1.0


def test_speedup_counts_censored_runs_as_slower() -> None:
    times = np.array([1000.0, 1000.0, 1000.0, 5000.0])
    fast = np.array([500.0, 500.0, 500.0])
    none = np.zeros(3, bool)
    # Baseline with 3 of 4 censored: its median is > budget, the ratio infinite.
    ratio, _, _ = stats.speedup(times, np.array([False, True, True, True]), fast, none)
    assert ratio == np.inf
    ratio, _, _ = stats.speedup(times, np.array([False, False, False, False]), fast, none)
    assert ratio == 2.0


def test_logrank_handles_censoring() -> None:
    t = np.array([100.0, 200.0, 300.0, 1000.0])
    c = np.array([False, False, False, True])
    assert survival.logrank(t, c, t, c).p_asymptotic == pytest.approx(1.0)
    slow = np.array([1000.0, 1000.0, 1000.0, 1000.0])
    assert survival.logrank(t, c, slow, np.ones(4, bool)).p_asymptotic < 0.1


def test_retried_run_duplicates_change_nothing(tmp_path: Path) -> None:
    cfg = {"model.norm": "none"}
    clean, retried = tmp_path / "clean", tmp_path / "retried"
    curves = {"a": step_curve(300, 8), "b": step_curve(500, 8), "c": step_curve(None, 8)}
    sink = ParquetSink(clean)
    for rid, curve in curves.items():
        write_run(sink, rid, curve, config={**cfg, "train.seed": ord(rid)})
    sink = ParquetSink(retried)
    # First attempt of "b" dies after 4 evaluations (its failed run row is written too) ...
    write_run(sink, "b", curves["b"][:4], config={**cfg, "train.seed": ord("b")}, status="failed")
    for rid, curve in curves.items():  # ... then the whole sweep is retried from scratch.
        write_run(sink, rid, curve, config={**cfg, "train.seed": ord(rid)})
    write_run(sink, "a", curves["a"], config={**cfg, "train.seed": ord("a")})  # re-reported
    a, b = stats.summarize_sweeps(clean), stats.summarize_sweeps(retried)
    pd.testing.assert_frame_equal(a.drop(columns="sweep"), b.drop(columns="sweep"))
    pd.testing.assert_frame_equal(
        comparisons.analysis_table(a, ["model.norm"], "model.norm=none"),
        comparisons.analysis_table(b, ["model.norm"], "model.norm=none"),
    )


def test_by_keys_auto_detected_and_validated(censored_group: pd.DataFrame) -> None:
    summary = censored_group.assign(**{"optim.weight_decay": [0.0, 1.0, 1.0, 0.0, 1.0]})
    assert stats.varying_keys(summary) == ["optim.weight_decay"]
    table = stats.group_summary(summary)
    assert table["label"].tolist() == ["wd=0", "wd=1"]
    assert table["n"].tolist() == [2, 3]
    with pytest.raises(stats.AnalysisError, match="allowed: ") as err:
        stats.group_summary(summary, ["optim.wd"])
    assert err.value.param == "by"


def test_baseline_matching(censored_group: pd.DataFrame) -> None:
    summary = censored_group.assign(**{"optim.weight_decay": [0.0, 1.0, 1.0, 0.0, 1.0]})
    assert comparisons.baseline_mask(summary, {"optim.weight_decay": "1"}).sum() == 3
    assert comparisons.baseline_mask(summary, {"model.norm": "none"}).sum() == 5
    with pytest.raises(stats.AnalysisError, match=r"values present: model\.norm: none") as err:
        comparisons.baseline_mask(summary, {"model.norm": "sphere"})
    assert err.value.param == "baseline"
    with pytest.raises(stats.AnalysisError, match="unknown key"):
        comparisons.compare(summary, "model.nrom=none")
    with pytest.raises(stats.AnalysisError, match="key=value"):
        comparisons.parse_baseline("model.norm")


def test_import_does_not_pull_ray_or_torch() -> None:
    code = (
        "import sys, sweepgrok.analysis.stats; "
        "bad = [m for m in ('ray', 'torch', 'optuna', 'matplotlib') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_runs_without_a_run_row_are_left_out_of_groups(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    write_run(sink, "done", step_curve(200, 5), config={"model.norm": "none"})
    sink.write_metrics([{"run_id": "running", "step": 0, "train_acc": 0.1, "test_acc": 0.1}])
    sink.flush()
    summary = stats.summarize_sweeps(tmp_path).set_index("run_id")
    assert summary["in_runs"].to_dict() == {"done": True, "running": False}
    kept, pending = stats.recorded_runs(summary.reset_index())
    assert kept["run_id"].tolist() == ["done"] and pending == 1


def test_default_threshold_follows_the_runs() -> None:
    same = pd.DataFrame({"train.grok_threshold": [0.95, 0.95]})
    mixed = pd.DataFrame({"train.grok_threshold": [0.95, 0.99]})
    assert stats.default_threshold(same) == 0.95
    assert stats.default_threshold(mixed) == 0.99
    assert stats.default_threshold(pd.DataFrame({"x": [1]})) == 0.99


def test_interrupted_runs_are_left_out_unless_censored_where_the_signal_came(
    tmp_path: Path,
) -> None:
    sink = ParquetSink(tmp_path)
    cfg = {"model.norm": "none"}
    write_run(sink, "ended", step_curve(200, 4), config=cfg, status="grokked", steps_run=300)
    # Interrupted at step 500: one had grokked at 300 (and went on), one never did.
    write_run(sink, "grokked_before", step_curve(300, 6), config=cfg, status="interrupted",
              steps_run=500)
    write_run(sink, "not_yet", step_curve(None, 6), config=cfg, status="interrupted",
              steps_run=500)
    sink.flush()
    _, summary, pending = stats.load_recorded_runs(tmp_path)
    assert summary["run_id"].tolist() == ["ended"] and pending == 2
    _, summary, pending = stats.load_recorded_runs(tmp_path, censor_interrupted=True)
    assert pending == 0 and stats.interrupted_count(summary) == 2
    rows = summary.set_index("run_id").loc[["ended", "grokked_before", "not_yet"]]
    times, censored = stats.times_and_censoring(rows, 0.95)
    assert times.tolist() == [200, 300, 500] and censored.tolist() == [False, False, True]
