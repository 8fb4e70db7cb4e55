"""analysis.dose_response: version 4's trend and fixed-time claims on synthetic runs.csv files
(the sweeps have not run), hand values for Spearman and the rules, the figure, the command."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Annotation

from analysis import aft, claims, verdicts
from analysis import dose_response as dr
from sweepgrok.analysis.survival import km_median

SPREAD = (0.8, 0.85, 0.9, 0.95, 1.05, 1.1, 1.15, 1.2)
"""8 seeds' grok steps as multiples of their arm's median."""


def arm(sweep: str, wd: float, enabled: bool, median: float, budget: int,
        start_step: int = 2000) -> list[dict]:
    """8 runs of one arm, grokking at median x SPREAD (their KM median: `median`), censored
    (status completed, no grok step) beyond the budget."""
    rows = []
    for seed, f in enumerate(SPREAD, 1):
        t = median * f
        late = t > budget
        rows.append({
            "run_id": f"{sweep}-{wd:g}-{enabled}-{start_step}-s{seed}",
            "status": "completed" if late else "grokked", "steps_run": budget if late else t,
            "grok_step_95": math.nan if late else t, "train.max_steps": budget,
            "train.seed": seed, "geomdr.enabled": enabled, "geomdr.start_step": start_step,
            "optim.weight_decay": wd,
        })  # fmt: skip
    return rows


def write_sources(folder: Path, slowest_baseline: float = 13_000.0) -> Path:
    """The three runs.csv: the baseline's median 400 / weight decay (addition at 0.03:
    slowest_baseline), GeomDR's 1,000 everywhere; repro3_slow_cpu with its t_s 500 arm (100
    steps, not read)."""
    def cells(sweep: str, wds: tuple[float, ...], budget: int) -> list[dict]:
        rows = []
        for wd in wds:
            base = slowest_baseline if (sweep, wd) == (claims.DOSE, 0.03) else 400 / wd
            rows += arm(sweep, wd, False, base, budget) + arm(sweep, wd, True, 1000, budget)
        return rows

    slow = (arm(claims.SLOW, 0.3, False, 400 / 0.3, 30_000, start_step=500)
            + arm(claims.SLOW, 0.3, True, 1000, 30_000)
            + arm(claims.SLOW, 0.3, True, 100, 30_000, start_step=500))  # fmt: skip
    tables = {claims.DOSE: cells(claims.DOSE, (1.0, 0.1, 0.03), 60_000), claims.SLOW: slow,
              claims.DOSE_DIV: cells(claims.DOSE_DIV, (0.1, 0.03), 60_000)}  # fmt: skip
    for sweep, rows in tables.items():
        (folder / sweep).mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(folder / sweep / "runs.csv", index=False)
    return folder


# ---------------------------------------------------------------- the runs and the cells


def test_the_cells_are_four_for_addition_and_two_for_division(tmp_path: Path) -> None:
    cells = dr.cell_table(dr.load_runs(write_sources(tmp_path)))
    assert list(zip(cells["task"], cells["weight_decay"], strict=True)) == [
        ("addition", 1.0), ("addition", 0.3), ("addition", 0.1), ("addition", 0.03),
        ("division", 0.1), ("division", 0.03)]  # fmt: skip
    assert (cells["n_baseline"] == 8).all() and (cells["n_geomdr"] == 8).all()
    # The reused 0.3 cell: repro3_slow_cpu's t_s 2000 arm, never its t_s 500 arm (100 steps).
    at = cells.set_index(["task", "weight_decay"]).loc[("addition", 0.3)]
    assert at["geomdr_median"] == pytest.approx(1000.0)
    assert at["baseline_median"] == pytest.approx(4000 / 3)
    assert at["speedup"] == pytest.approx(4 / 3)


def test_a_censored_baseline_has_no_median_and_a_bound(tmp_path: Path) -> None:
    cells = dr.cell_table(dr.load_runs(write_sources(tmp_path, slowest_baseline=80_000)))
    slowest = cells.iloc[3]
    assert slowest["baseline_censored"] and math.isnan(slowest["baseline_median"])
    assert slowest["baseline_longest"] == pytest.approx(60_000) and slowest["grokked_baseline"] == 0
    assert math.isinf(slowest["speedup"]) and slowest["speedup_bound"] == pytest.approx(60.0)


def test_the_trend_design_reads_the_projects_censoring() -> None:
    # A diverged run is censored at its budget (stats.times_and_censoring), not where it stopped.
    runs = pd.DataFrame(
        arm("s", 1.0, False, 1000, 6000) + arm("s", 1.0, True, 500, 6000)
        + arm("s", 0.1, False, 5400, 6000) + arm("s", 0.1, True, 600, 6000))  # fmt: skip
    runs.loc[0, ["status", "steps_run", "grok_step_95"]] = ["diverged", 300, math.nan]
    x, times, censored, names = dr.aft_design(runs)
    assert names == ("a(wd=1)", "a(wd=0.1)", "b", "c")
    assert times[0] == 6000 and censored[0] and censored.sum() == 3  # two baselines past 6,000
    np.testing.assert_array_equal(x[:, 3], runs["geomdr.enabled"] * np.log10(1 / runs[dr.WD]))
    fit = dr.fit_trend(runs)
    direct = aft.fit_lognormal_aft(x, times, censored, names)
    np.testing.assert_allclose(fit.coef, direct.coef)


def test_the_trend_is_found_and_held_on_runs_with_a_growing_speed_up(tmp_path: Path) -> None:
    runs = dr.load_runs(write_sources(tmp_path))
    cells = dr.cell_table(runs)
    j = dr.judge(runs, cells, family=[0.2, 0.01])
    assert j.fit is not None and j.fit.converged and j.trend is not None
    # GeomDR fixed at 1,000 while the baseline grows tenfold per decade: c ~ -log(10).
    assert j.trend.c == pytest.approx(-math.log(10), abs=0.15)
    assert j.trend.growth == pytest.approx(10, rel=0.15) and j.m == 3
    assert j.trend_verdict.verdict == verdicts.REPRODUCED
    assert j.spearman[:2] == (1.0, pytest.approx(1 / 24))
    assert j.fixed is not None and j.fixed.ratio == 1.0
    assert j.fixed_verdict.verdict == verdicts.REPRODUCED


# ---------------------------------------------------------------- the tests and rules


@pytest.mark.parametrize(("x", "y", "rho", "p"), [
    ([1, 2, 3, 4], [1, 2, 3, 4], 1.0, 1 / 24),
    ([1, 2, 3, 4], [2, 1, 3, 4], 0.8, 4 / 24),  # identity and the three adjacent swaps
    ([1, 2, 3, 4], [4, 3, 2, 1], -1.0, 1.0),
    ([1, 2, 3, 4], [1, 1, 2, 3], math.sqrt(0.9), 2 / 24),  # a tie: both of its orderings
    ([100, 200, 300, math.inf], [1.5, 2, 3, math.inf], 1.0, 1 / 24),  # +inf ranks last
])  # fmt: skip
def test_spearman_and_its_exact_one_sided_p_by_hand(x, y, rho: float, p: float) -> None:
    got_rho, got_p = dr.spearman_exact(x, y)
    assert got_rho == pytest.approx(rho) and got_p == pytest.approx(p)


def test_spearman_needs_three_points_that_vary() -> None:
    assert all(math.isnan(v) for v in dr.spearman_exact([1, 2], [1, 2]))
    assert all(math.isnan(v) for v in dr.spearman_exact([1, 2, 3], [5, 5, 5]))


def test_a_censored_value_ranks_only_when_its_bound_clears_the_others() -> None:
    values = np.array([10.0, 20.0, math.inf])
    assert dr.ranked_values(values, np.array([10.0, 20.0, 25.0])) is values
    assert dr.ranked_values(values, np.array([10.0, 20.0, 15.0])) is None
    assert dr.ranked_values(np.array([0.0, 2.0, 3.0]), np.array([2.5, 2.0, 3.0])) is None


def test_the_wald_test_of_c_and_exp_minus_c() -> None:
    fit = aft.AftFit(("b", "c"), np.array([0.0, -0.2]), np.array([1.0, 0.1]), 1.0, 0.1, -10.0,
                     16, 16, True)  # fmt: skip
    t = dr.trend(fit)
    assert t.p_less == pytest.approx(0.0227501319) and t.p_greater == pytest.approx(0.9772498681)
    assert (t.growth, t.growth_lo, t.growth_hi) == pytest.approx(
        (math.exp(0.2), math.exp(0.2 - 1.959964 * 0.1), math.exp(0.2 + 1.959964 * 0.1)))
    # Holm with the family's tested p's: [0.0228, 0.04, 0.2] -> 3 x 0.0228 = 0.068.
    assert dr.holm_pair(t, [0.04, 0.2]) == pytest.approx((3 * t.p_less, t.p_greater))


def _trend(c: float) -> tuple[aft.AftFit, dr.Trend]:
    fit = aft.AftFit(("c",), np.array([c]), np.array([0.1]), 1.0, 0.1, -1.0, 64, 60, True)
    return fit, dr.trend(fit)


@pytest.mark.parametrize(("c", "p_holm", "n", "word"), [
    (-0.5, (0.01, 0.99), 8, verdicts.REPRODUCED),
    (-0.5, (0.01, 0.99), 4, verdicts.DIRECTION_ONLY),  # n < 8
    (-0.5, (0.06, 0.99), 8, verdicts.DIRECTION_ONLY),  # p Holm not below 0.05
    (0.5, (0.99, 0.01), 8, verdicts.CONTRADICTED),
    (0.5, (0.99, 0.06), 8, verdicts.NOT_IN_DIRECTION),
    (-0.5, (0.01, 0.99), 1, verdicts.NOT_TESTED),
])  # fmt: skip
def test_the_trend_rule(c: float, p_holm: tuple[float, float], n: int, word: str) -> None:
    assert dr.trend_verdict(*_trend(c), p_holm, n).verdict == word


def test_a_fit_without_an_optimum_is_not_tested() -> None:
    fit, t = _trend(-0.5)
    stuck = aft.AftFit(fit.names, fit.coef, fit.se, 1.0, 0.1, -1.0, 64, 60, False)
    assert dr.trend_verdict(stuck, t, (0.01, 0.99), 8).verdict == verdicts.NOT_TESTED
    assert dr.trend_verdict(None, None, (math.nan, math.nan), 8).verdict == verdicts.NOT_TESTED


@pytest.mark.parametrize(("ratio", "lo", "hi", "n", "word"), [
    (1.0, 0.7, 1.4, 8, verdicts.REPRODUCED),
    (1.0, 0.5, 1.4, 8, verdicts.DIRECTION_ONLY),  # a CI end on the margin is not inside
    (1.0, 0.7, 1.4, 4, verdicts.DIRECTION_ONLY),  # n < 8
    (3.0, 2.1, 4.0, 8, verdicts.CONTRADICTED),
    (3.0, 2.0, 4.0, 8, verdicts.NOT_IN_DIRECTION),  # not wholly outside
    (0.3, 0.2, 0.45, 8, verdicts.CONTRADICTED),
    (math.nan, math.nan, math.nan, 8, verdicts.NOT_TESTED),
])  # fmt: skip
def test_the_fixed_time_rule(ratio: float, lo: float, hi: float, n: int, word: str) -> None:
    assert dr.fixed_time_verdict(dr.FixedTime(0.03, 1.0, ratio, lo, hi, n)).verdict == word
    assert dr.fixed_time_verdict(None).verdict == verdicts.NOT_TESTED


def test_the_fixed_time_ratio_is_the_slowest_cells_median_over_the_fastest() -> None:
    runs = pd.DataFrame(arm("s", 1.0, True, 1000, 60_000) + arm("s", 0.1, True, 2000, 60_000)
                        + arm("s", 0.03, True, 3000, 60_000)
                        + arm("s", 0.03, False, 9000, 60_000))  # fmt: skip
    ft = dr.fixed_time(runs)
    slow = km_median(runs["grok_step_95"][2 * 8 : 3 * 8], np.zeros(8, bool))  # 0.03, GeomDR
    assert ft is not None and (ft.slow_wd, ft.fast_wd, ft.n) == (0.03, 1.0, 8)
    assert slow == pytest.approx(3000) and ft.ratio == pytest.approx(3.0) and ft.lo > 2
    assert dr.fixed_time_verdict(ft).verdict == verdicts.CONTRADICTED


# ---------------------------------------------------------------- the figure


def test_the_figure_has_both_series_the_papers_marks_and_a_bound_for_a_censored_cell(
    tmp_path: Path,
) -> None:
    cells = dr.cell_table(dr.load_runs(write_sources(tmp_path, slowest_baseline=80_000)))
    fig = dr.draw_figure(cells)
    (ax,) = fig.axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["addition", "paper: 52x (addition)", "division", "paper: 39x (division)"]
    paper = [line for line in ax.get_lines() if line.get_label().startswith("paper")]
    marks = sorted(line.get_ydata()[0] for line in paper)
    assert marks == [39, 52]
    assert len(ax.containers) == 5  # error bars: every cell but the censored one
    arrows = [a for a in ax.texts if isinstance(a, Annotation) and a.get_gid() == dr.BOUND_GID]
    assert len(arrows) == 2  # right (the median) and up (the speed-up)
    fig.canvas.draw()
    directions = set()
    for a in arrows:
        assert a.xyann == pytest.approx((60_000, 60.0))  # at the budget and budget / 1,000
        tail = ax.transData.transform(a.xyann)
        head = a.xycoords.transform(a.xy)
        directions.add(tuple(np.sign(np.round(head - tail, 6)).astype(int)))
    assert directions == {(1, 0), (0, 1)}
    path = dr.write_figure(cells, tmp_path / "out" / "f.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- the command


def test_without_its_runs_it_names_the_missing_files_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / claims.DOSE).mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "analysis.dose_response", "--summaries", str(tmp_path)],
        capture_output=True, text=True, check=False, cwd=Path(dr.__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    for source in dr.SOURCES:
        assert f"{source.sweep}/runs.csv" in done.stdout
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_it_writes_the_summary_the_cells_and_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dr, "control_family_p", lambda summaries: [0.2, 0.01])
    write_sources(tmp_path / "s")
    assert dr.main(["--summaries", str(tmp_path / "s"), "--out", str(tmp_path / "o")]) == 0
    out = tmp_path / "o"
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == sorted([dr.OUT_CSV, dr.OUT_MD, dr.OUT_FIGURE])
    assert len(pd.read_csv(out / dr.OUT_CSV)) == 6
    text = (out / dr.OUT_MD).read_text()
    assert text.count("**reproduced**") == 2 and "(m = 3)" in text
    assert "wrote:" in capsys.readouterr().out


def test_a_runs_csv_it_cannot_read_exits_2_naming_the_file_and_the_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_sources(tmp_path)
    path = tmp_path / claims.DOSE_DIV / "runs.csv"
    pd.read_csv(path).drop(columns=dr.WD).to_csv(path, index=False)
    assert dr.main(["--summaries", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and dr.WD in err
    assert not (tmp_path / "o").exists()


def test_the_holm_family_is_the_claims_tables_our_controls() -> None:
    report = (claims.HERE / "REPRODUCTION.md").read_text()
    m = {int(x) for x in re.findall(r"family our controls, m = (\d+)", report)}
    assert len(dr.control_family_p(dr.SUMMARIES)) in m and len(m) == 1
