"""sweepgrok.analysis.comparisons: per-stratum baselines, informative censoring, exact p, Holm,
paired
seeds and thresholds the runs could not see, on hand-built run summaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweepgrok.analysis import comparisons, stats


def summary_of(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """A run summary as stats.run_summary makes it, from (config, grok step, steps_run) rows."""
    frame = pd.DataFrame(runs)
    frame["run_id"] = [f"r{i}" for i in range(len(frame))]
    for theta in ("95", "99"):
        frame[f"grok_step_{theta}"] = pd.array(frame.get(f"grok_{theta}"), dtype="Int64")
    for theta in ("95", "99"):
        frame[f"delay_{theta}"] = frame[f"grok_step_{theta}"] - 0
    frame["steps_run"] = pd.array(frame["steps_run"], dtype="Int64")
    frame["collapse_step"] = pd.array([None] * len(frame), dtype="Int64")
    frame["collapse_to_grok_95"] = frame["collapse_to_grok_99"] = frame["collapse_step"]
    return frame.drop(columns=[c for c in ("grok_95", "grok_99") if c in frame])


def run(grok: int | None, steps: int | None = None, **config: Any) -> dict[str, Any]:
    status = "completed" if grok is not None else "censored"
    row = {"grok_95": grok, "grok_99": grok, "steps_run": steps or grok, "status": status}
    return row | {k.replace("__", "."): v for k, v in config.items()}


def test_a_diverged_run_stays_at_risk_until_its_budget() -> None:
    runs = [run(g, **{"train__max_steps": 5000}) for g in (1000, 2000, 3000, 4000)]
    diverged = run(None, 100, **{"train__max_steps": 5000}) | {"status": "diverged"}
    row = stats.group_summary(summary_of([*runs, diverged]), [], threshold=0.99).iloc[0]
    # At risk to 5000, not 100: S = 0.8, 0.6, 0.4 at 1000, 2000, 3000 (was 2000 when it left).
    assert row["km_median"] == 3000
    assert (row["n"], row["n_grokked"], row["n_failed"]) == (5, 4, 1)
    assert row["success_rate"] == 0.8
    times, censored = stats.times_and_censoring(summary_of([diverged]), 0.99)
    assert times.tolist() == [5000.0] and censored.tolist() == [True]
    unknown_budget = summary_of([run(None, 100) | {"status": "failed"}])
    assert stats.times_and_censoring(unknown_budget, 0.99)[0].tolist() == [np.inf]


def test_km_median_in_the_table_is_the_sample_median_without_censoring() -> None:
    row = stats.group_summary(summary_of([run(500), run(800)]), [], threshold=0.99).iloc[0]
    assert row["km_median"] == 650 and row["grok_median"] == 650
    assert row["few_runs"]  # 2 < 5 runs: the bootstrap interval is about the range


def strata_layout() -> pd.DataFrame:
    """div/add x GeomDR on/off; add-off groks slowly, div-off very slowly."""
    steps = {("div", True): 1000, ("div", False): 8000, ("add", True): 900, ("add", False): 3000}
    runs = [
        run(g + 100 * s, **{"task__name": task, "geomdr__enabled": on, "train__seed": s})
        for (task, on), g in steps.items()
        for s in range(3)
    ]
    return summary_of(runs)


def test_baseline_is_taken_within_each_stratum() -> None:
    table = comparisons.compare(
        strata_layout(), "geomdr.enabled=false", ["task.name", "geomdr.enabled"]
    ).set_index("label")
    div_on = table.loc["task=div, GeomDR=true"]
    assert div_on["baseline_group"] == "task=div, GeomDR=false"
    assert div_on["speedup"] == pytest.approx(8100 / 1100)  # div-off vs div-on, not add-off
    add_on = table.loc["task=add, GeomDR=true"]
    assert add_on["baseline_group"] == "task=add, GeomDR=false"
    assert add_on["speedup"] == pytest.approx(3100 / 1000)
    assert table["is_baseline"].sum() == 2
    # Two comparisons: Holm doubles the smaller p.
    p = table["p"].dropna().sort_values()
    assert table["p_holm"].dropna().min() == pytest.approx(min(1.0, 2 * p.iloc[0]))


def test_a_stratum_without_baseline_gets_no_comparison() -> None:
    summary = strata_layout()
    summary = summary[~((summary["task.name"] == "add") & ~summary["geomdr.enabled"])]
    table = comparisons.compare(summary, "geomdr.enabled=false", ["task.name", "geomdr.enabled"])
    add_on = table.set_index("label").loc["task=add, GeomDR=true"]
    assert pd.isna(add_on["baseline_group"]) and np.isnan(add_on["speedup"])
    assert np.isnan(add_on["p"]) and not add_on["is_baseline"]


def test_a_baseline_fixing_every_key_serves_every_group() -> None:
    table = comparisons.compare(
        strata_layout(), "task.name=add,geomdr.enabled=false", ["task.name", "geomdr.enabled"]
    )
    assert set(table["baseline_group"]) == {"task=add, GeomDR=false"}
    assert comparisons.n_comparisons(table) == 3


def test_baseline_key_must_be_a_grouping_key_and_given_once() -> None:
    with pytest.raises(stats.AnalysisError, match="add them to --by") as err:
        comparisons.compare(strata_layout(), "geomdr.enabled=false", ["task.name"])
    assert err.value.param == "baseline"
    with pytest.raises(stats.AnalysisError, match="given twice"):
        comparisons.parse_baseline("model.norm=none,model.norm=sphere")


def test_three_against_three_complete_separation_reports_the_exact_p() -> None:
    runs = [run(g, **{"model__norm": "none", "train__seed": i}) for i, g in enumerate((4, 5, 6))]
    runs += [run(g, **{"model__norm": "sphere", "train__seed": i}) for i, g in enumerate((1, 2, 3))]
    summary = summary_of([r | {"grok_99": r["grok_99"] * 100} for r in runs])
    summary["steps_run"] = summary["grok_step_99"]
    table = comparisons.analysis_table(summary, ["model.norm"], "model.norm=none", threshold=0.99)
    sphere = table.set_index("model.norm").loc["sphere"]
    assert 0.09 <= sphere["p"] <= 0.11 and sphere["p_exact"]
    assert sphere["p_asymptotic"] == pytest.approx(0.0246, abs=1e-3)
    assert sphere["speedup"] == pytest.approx(2.5)


def paired_layout(seeds_b: tuple[int, ...] = (1, 2, 3, 4, 5)) -> pd.DataFrame:
    base = [run(1000 * s, **{"model__norm": "none", "train__seed": s}) for s in (1, 2, 3, 4, 5)]
    fast = [run(250 * s, **{"model__norm": "sphere", "train__seed": s}) for s in seeds_b]
    return summary_of(base + fast)


def test_paired_seeds_give_a_stratified_test_and_per_seed_speedups() -> None:
    table = comparisons.compare(paired_layout(), "model.norm=none", ["model.norm"], paired=True)
    sphere = table.set_index("model.norm").loc["sphere"]
    assert sphere["test"] == "log-rank stratified by seed"
    assert sphere["n_pairs"] == 5 and sphere["n_pairs_censored"] == 0
    assert sphere["paired_speedup"] == 4.0  # 1000 s / 250 s for every seed s
    # Each pair alone is a 1-vs-1 with the sphere run first: all 5 agree; 2^5 = 32 flips and
    # only the observed one and its mirror are as extreme.
    assert sphere["p_exact"] and sphere["p"] == pytest.approx(2 / 32)


def test_paired_is_refused_when_seeds_differ() -> None:
    with pytest.raises(stats.AnalysisError, match="seeds of") as err:
        comparisons.compare(
            paired_layout((1, 2, 3, 4, 6)), "model.norm=none", ["model.norm"], paired=True
        )
    assert err.value.param == "paired"


def test_a_threshold_the_runs_stopped_short_of_is_refused() -> None:
    stopped = [
        {"grok_95": 500, "grok_99": None, "steps_run": 500, "status": "grokked"}
        | {"train.grok_threshold": 0.95, "train.stop_after_grok": True, "model.norm": n}
        for n in ("none", "sphere")
    ]
    summary = summary_of(stopped)
    assert comparisons.supported_thresholds(summary) == [0.95]
    with pytest.raises(stats.AnalysisError, match=r"never saw 0\.99.*support: 0\.95") as err:
        comparisons.analysis_table(summary, ["model.norm"], threshold=0.99)
    assert err.value.param == "threshold"
    assert len(comparisons.analysis_table(summary, ["model.norm"], threshold=0.95)) == 2
    ran_on = summary.assign(status="completed")  # runs that trained on past their grok
    assert comparisons.supported_thresholds(ran_on) == [0.95, 0.99]


def test_a_key_zipped_with_the_baselines_keys_goes_with_the_arms_not_the_strata() -> None:
    # The quickstart's zip: the sphere runs without weight decay, the other arms with it.
    arms = {("none", "softmax", 1.0): 5000, ("sphere", "softmax", 0.0): 600,
            ("none", "uniform", 1.0): 800}
    summary = summary_of([
        run(g + 10 * s, **{"model__norm": n, "model__attention": a, "optim__weight_decay": wd,
                           "train__seed": s})
        for (n, a, wd), g in arms.items() for s in range(3)
    ])
    keys = stats.resolve_by(summary, None)
    assert keys == ["model.norm", "model.attention", "optim.weight_decay"]
    spec = {"model.norm": "none", "model.attention": "softmax"}
    assert comparisons.arm_keys(summary, spec, keys) == ["optim.weight_decay"]
    assert comparisons.stratum_keys(summary, spec, keys) == []
    table = comparisons.compare(summary, spec, keys).set_index("label")
    base = "norm=none, attention=softmax, wd=1"
    assert table.loc["norm=sphere, attention=softmax, wd=0", "baseline_group"] == base
    assert table.loc["norm=sphere, attention=softmax, wd=0", "speedup"] == pytest.approx(5010 / 610)
    assert comparisons.n_comparisons(table.reset_index()) == 2
    # A key crossed with the baseline's keys stays a stratum (norm=none holds both wd values).
    crossed = pd.concat([summary, summary_of([run(4000, **{
        "model__norm": "none", "model__attention": "softmax", "optim__weight_decay": 0.0})])])
    assert comparisons.stratum_keys(crossed, spec, keys) == ["optim.weight_decay"]
