"""Every committed summary with its evaluated columns (metrics.parquet): the grok and fit steps
of its runs.csv are recomputed from them (first evaluation at or above the threshold)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import GROKS, write_sweep

from analysis.evaluated import COLUMNS, FILE, write_evaluated
from analysis.last_values import DEFAULT_COLUMNS, last_values
from sweepgrok.train.events import FIT_THRESHOLD

SUMMARIES = Path(__file__).resolve().parents[2] / "analysis" / "reproduction"
ACCELERATORS = "../accelerators"
"""The accelerator comparison's summary (analysis/accelerators), beside the others."""
WITH_METRICS = [*sorted(p.parent.name for p in SUMMARIES.glob(f"*/{FILE}")), ACCELERATORS]
GROK_STEP_THRESHOLD = {"paper1_layernorm_h200": 0.95}
"""A summary whose runs.csv has one grok_step: its trial file's train.grok_threshold."""


def first_step(metrics: pd.DataFrame, column: str, threshold: float) -> pd.Series:
    reached = metrics[metrics[column] >= threshold]
    return reached.groupby("run_id")["step"].min()


def recomputed(sweep: str) -> dict[str, tuple[str, float]]:
    """runs.csv column -> (metrics column, threshold) for this summary."""
    wanted = {"fit_step": ("train_acc", FIT_THRESHOLD)}
    wanted |= {f"grok_step_{t}": ("test_acc", int(t) / 100) for t in ("95", "99")}
    if sweep in GROK_STEP_THRESHOLD:
        wanted["grok_step"] = ("test_acc", GROK_STEP_THRESHOLD[sweep])
    return wanted


def test_the_summaries_with_evaluated_columns() -> None:
    assert {"paper1_layernorm_h200", "repro3_dstar_cpu", ACCELERATORS} <= set(WITH_METRICS)
    assert all((SUMMARIES / sweep / FILE).is_file() for sweep in WITH_METRICS)


@pytest.mark.parametrize("sweep", WITH_METRICS)
def test_grok_and_fit_steps_recompute_from_the_evaluated_columns(sweep: str) -> None:
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv").set_index("run_id")
    metrics = pd.read_parquet(SUMMARIES / sweep / FILE)
    assert set(metrics["run_id"]) == set(runs.index)
    checked = 0
    for column, (source, threshold) in recomputed(sweep).items():
        if column not in runs.columns:
            continue
        got = first_step(metrics, source, threshold).reindex(runs.index)
        assert got.astype(float).equals(runs[column].astype(float)), (sweep, column)
        checked += 1
    assert checked >= 2


LAST_VALUE_SUMMARIES = sorted(
    sweep for sweep in WITH_METRICS
    if "fourier_unembed_above_chance_last" in pd.read_csv(SUMMARIES / sweep / "runs.csv", nrows=0)
    and "fourier_unembed_above_chance" in pq.read_schema(SUMMARIES / sweep / FILE).names
)  # fmt: skip


@pytest.mark.parametrize("sweep", LAST_VALUE_SUMMARIES)
def test_the_fourier_last_values_recompute_from_the_evaluated_columns(sweep: str) -> None:
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv").set_index("run_id")
    metrics = pd.read_parquet(SUMMARIES / sweep / FILE)
    columns = [c for c in DEFAULT_COLUMNS if f"{c}_last" in runs.columns]
    got = last_values(metrics, columns).reindex(runs.index)
    pd.testing.assert_frame_equal(got, runs[got.columns], check_exact=True)


def summary_of(sweeps: list[Path], folder: Path, left_out: int = 0) -> Path:
    """A summary folder whose runs.csv lists the sweeps' runs but the last `left_out`."""
    from sweepgrok.store.sink import read_runs

    run_ids = sorted(run for sweep in sweeps for run in read_runs(sweep)["run_id"])
    folder.mkdir()
    pd.DataFrame({"run_id": run_ids[: len(run_ids) - left_out]}).to_csv(folder / "runs.csv")
    return folder


def test_write_keeps_the_evaluated_columns_sorted(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "sweep", GROKS)
    written = pd.read_parquet(write_evaluated([sweep], summary_of([sweep], tmp_path / "summary")))
    assert len(written) == 6 * 11  # six runs, eleven evaluations each
    assert list(written.columns) == [c for c in COLUMNS if c in written.columns]
    assert {"run_id", "step", "test_acc", "train_acc"} <= set(written.columns)
    assert written.equals(written.sort_values(["run_id", "step"]).reset_index(drop=True))


def test_a_run_the_summary_leaves_out_keeps_no_evaluations(tmp_path: Path) -> None:
    # e.g. a run an interrupted sweep had not ended: metrics/ rows, no run row, not summarized
    sweep = write_sweep(tmp_path / "sweep", GROKS)
    summary = summary_of([sweep], tmp_path / "summary", left_out=2)
    written = pd.read_parquet(write_evaluated([sweep], summary))
    listed = set(pd.read_csv(summary / "runs.csv")["run_id"])
    assert set(written["run_id"]) == listed and len(listed) == 4
    assert len(written) == 4 * 11


def test_two_sweeps_pooled_in_one_summary_keep_both_sweeps_evaluations(tmp_path: Path) -> None:
    # the accelerator comparison: accelerators and accelerators_perp_wd0 in one runs.csv
    first = write_sweep(tmp_path / "first", GROKS)
    second = write_sweep(tmp_path / "second", GROKS)
    summary = summary_of([first, second], tmp_path / "summary")
    run_ids = sorted(pd.read_csv(summary / "runs.csv")["run_id"])
    run = subprocess.run(
        [sys.executable, "-m", "analysis.evaluated", str(first), str(second), str(summary)],
        capture_output=True, text=True, cwd=SUMMARIES.parents[1],
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    written = pd.read_parquet(summary / FILE)
    assert sorted(set(written["run_id"])) == run_ids and len(written) == 12 * 11


def test_a_summary_folder_without_runs_csv_is_refused(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "analysis.evaluated", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=SUMMARIES.parents[1],
    )  # fmt: skip
    assert run.returncode == 2 and "no runs.csv" in run.stderr and "Traceback" not in run.stderr



def arm_metrics(sweep: str, where: dict[str, object]) -> pd.DataFrame:
    """One arm's evaluated columns, keyed by seed instead of run id."""
    runs = pd.read_csv(SUMMARIES / sweep / "runs.csv")
    for key, value in where.items():
        runs = runs[runs[key] == value]
    seeds = runs.set_index("run_id")["train.seed"]
    metrics = pd.read_parquet(SUMMARIES / sweep / FILE)
    metrics = metrics[metrics["run_id"].isin(seeds.index)]
    metrics = metrics.assign(seed=metrics["run_id"].map(seeds)).drop(columns="run_id")
    return metrics.sort_values(["seed", "step"]).reset_index(drop=True)


def test_one_config_twice_on_one_code_and_machine_gives_the_same_bits() -> None:
    # REPRODUCTION.md: the lambda control's tail at 0.1 is the d* control's d* 16 arm again.
    tail = arm_metrics("repro3_lambda_cpu", {"geomdr.penalty": "tail", "geomdr.lambda_max": 0.1})
    d16 = arm_metrics("repro3_dstar_cpu", {"geomdr.target_dim": 16})
    assert sorted(set(tail["seed"])) == list(range(1, 9))
    pd.testing.assert_frame_equal(tail, d16, check_exact=True)


@pytest.mark.parametrize("start_step", [100, 2000])
def test_the_grid_control_repeats_the_start_controls_d16_arms_bit_for_bit(start_step: int) -> None:
    # REPRODUCTION.md: the d* x t_s control's d* 16 arms are the t_s control's arms again (two
    # codes, e54d923 and ed5b0de, whose training code is the same, on this machine).
    grid = arm_metrics("repro3_grid_cpu", {"geomdr.target_dim": 16,
                                           "geomdr.start_step": start_step})
    start = arm_metrics("repro3_start_cpu", {"geomdr.start_step": start_step})
    assert sorted(set(grid["seed"])) == list(range(1, 9))
    pd.testing.assert_frame_equal(grid, start, check_exact=True)


@pytest.mark.parametrize(("kind", "first_arm_steps"), [("ema", 20000), ("none", 3800)])
def test_the_grokfast_mlp_sweep_repeats_the_first_sweeps_mlp_arms_bit_for_bit(
    kind: str, first_arm_steps: int
) -> None:
    # REPRODUCTION.md: the MLP half rerun whole (code 5cf1f11) repeats the first sweep's MLP
    # arms (code 936ea88) at weight decay 0.005, as far as they ran (the no-filter arm was
    # interrupted at step 3,800).
    where = {"model.arch": "mlp", "grokfast.kind": kind, "optim.weight_decay": 0.005}
    first = arm_metrics("repro3_grokfast_cpu", where)
    again = arm_metrics("repro3_grokfast_mlp_cpu", where)
    assert first["step"].max() == first_arm_steps and again["step"].max() == 20000
    again = again[again["step"] <= first_arm_steps].reset_index(drop=True)
    assert sorted(set(again["seed"])) == list(range(1, 9))
    pd.testing.assert_frame_equal(again[first.columns], first, check_exact=True)


def test_the_paper2_twins_rerun_repeats_the_dstar_controls_d16_arm_bit_for_bit() -> None:
    # REPRODUCTION.md: repro2_paper2_cpu's GeomDR arm, rerun with code babaec9, is the d*
    # control's d* 16 arm (code 140d8e9) again (the first run, code not recorded, was not).
    rerun = arm_metrics("repro2_paper2_cpu", {"geomdr.enabled": True, "geomdr.penalty": "tail"})
    d16 = arm_metrics("repro3_dstar_cpu", {"geomdr.target_dim": 16})
    assert sorted(set(rerun["seed"])) == list(range(1, 9))
    pd.testing.assert_frame_equal(rerun[d16.columns], d16, check_exact=True)


def test_the_filter_alone_control_repeats_the_reference_optimizers_filter_arm_bit_for_bit() -> None:
    # REPRODUCTION.md: repro3_grokfast_l2_cpu's filter arm is repro3_grokfast_adam_cpu's again
    # (the same config, codes 93fb80d and 77927c4); only the wall clock differs.
    where = {"grokfast.kind": "ema"}
    first = arm_metrics("repro3_grokfast_adam_cpu", where).drop(columns="wall_time")
    again = arm_metrics("repro3_grokfast_l2_cpu", where).drop(columns="wall_time")
    assert sorted(set(first["seed"])) == list(range(1, 9))
    pd.testing.assert_frame_equal(again, first, check_exact=True)
