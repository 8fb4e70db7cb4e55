"""`sweepgrok analyze` through CliRunner: every format, several folders, plots, and exit 2."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import EVAL, GROKS, write_sweep
from conftest import one_line_error as message
from typer.testing import CliRunner

from sweepgrok.analysis import comparisons, stats
from sweepgrok.cli import app
from sweepgrok.config.trial import Config, flatten, update
from sweepgrok.store.sink import ParquetSink

runner = CliRunner()
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "quick", GROKS)


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    # Into a pipe the table is one wide table unless $COLUMNS says otherwise: a shell that
    # exports COLUMNS (seen: 80 on a GPU machine) would wrap the rows these tests read.
    monkeypatch.delenv("COLUMNS", raising=False)


def invoke(*args: str | Path, columns: int | None = None) -> tuple[int, str]:
    env = {"COLUMNS": str(columns)} if columns else None  # the table's width, as a shell sets it
    result = runner.invoke(app, ["analyze", *map(str, args)], env=env)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_table_is_the_default(sweep: Path) -> None:
    code, out = invoke(sweep, "--baseline", "model.norm=none", columns=200)
    assert code == 0, out
    assert "norm" in out and "KM median" in out and "p (exact)" in out
    (sphere_line,) = [line for line in out.splitlines() if line.startswith("sphere ")]
    assert "3/3 100%" in sphere_line and "300" in sphere_line
    (none_line,) = [line for line in out.splitlines() if line.startswith("none ")]
    assert "2/3" in none_line and "baseline" in none_line and "> 1,000" not in none_line


def test_csv_matches_the_library(sweep: Path) -> None:
    code, out = invoke(sweep, "--format", "csv", "--baseline", "model.norm=none")
    assert code == 0, out
    table = pd.read_csv(io.StringIO(out)).set_index("model.norm")
    summary = stats.summarize_sweeps(sweep)
    expected = comparisons.analysis_table(summary, None, "model.norm=none")
    expected = expected.set_index("model.norm")
    assert table.loc["none", "n_grokked"] == 2 and table.loc["sphere", "km_median"] == 300
    assert table.loc["none", "km_median"] == 900  # S(800)=2/3, S(900)=1/3; censored at 1000
    for col in ("success_rate", "grok_median", "speedup", "p", "p_asymptotic"):
        assert table[col].tolist() == pytest.approx(expected[col].tolist(), nan_ok=True)
    assert table.loc["sphere", "speedup"] == 3.0  # 900 / 300


def test_json_records(sweep: Path) -> None:
    code, out = invoke(sweep, "--format", "json", "--threshold", "0.95")
    assert code == 0, out
    rows = {r["model.norm"]: r for r in json.loads(out)}
    assert rows["sphere"]["n"] == 3 and rows["none"]["success_rate"] == pytest.approx(2 / 3)
    assert rows["none"]["grok_median_lo"] is None or rows["none"]["grok_median_lo"] >= 800


def test_markdown_for_papers(sweep: Path) -> None:
    code, out = invoke(sweep, "--format", "markdown", "--by", "model.norm")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("| norm | grokked") and lines[1].startswith("|---|")
    assert sum(line.startswith("| ") for line in lines) == 3  # header + two groups
    assert "Kaplan-Meier" in out


def test_out_file_and_plots(sweep: Path, tmp_path: Path) -> None:
    target, figs = tmp_path / "res" / "table.csv", tmp_path / "figs"
    code, out = invoke(sweep, "--format", "csv", "--out", target, "--plots", figs)
    assert code == 0, out
    assert pd.read_csv(target)["n"].tolist() == [3, 3]
    names = {p.name for p in figs.glob("*.png")}
    assert {"accuracy.png", "grok_times.png", "survival.png", "deff.png", "progress.png"} <= names


def test_plots_as_vectors(sweep: Path, tmp_path: Path) -> None:
    figs = tmp_path / "figs"
    code, out = invoke(sweep, "--format", "csv", "--plots", figs, "--plot-format", "pdf")
    assert code == 0, out
    written = sorted(p.name for p in figs.iterdir())
    assert written == ["accuracy.pdf", "deff.pdf", "grok_times.pdf", "progress.pdf", "survival.pdf"]
    assert (figs / "survival.pdf").read_bytes().startswith(b"%PDF-")


def test_several_sweeps_together(sweep: Path, tmp_path: Path) -> None:
    other = write_sweep(tmp_path / "again", {"sphere": [100, 100]}, seed0=10)
    code, out = invoke(sweep, other, "--format", "csv")
    assert code == 0, out
    assert pd.read_csv(io.StringIO(out)).set_index("model.norm")["n"].to_dict() == {
        "none": 3,
        "sphere": 5,
    }
    code, out = invoke(sweep, other, "--format", "csv", "--by", "sweep")
    assert pd.read_csv(io.StringIO(out)).set_index("sweep")["n"].to_dict() == {
        "again": 2,
        "quick": 6,
    }


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--by", "model.nrom"], ["error: --by: unknown key 'model.nrom' (did you mean "
                                   "'model.norm'?); keys that vary in these runs: model.norm "
                                   "(norm); allowed: "]),
        (["--by", "nrom"], ["error: --by: unknown key 'nrom' (did you mean 'norm'?)"]),
        (["--baseline", "norm=spehre"], ["--baseline", "no run matches model.norm=spehre",
                                         "(did you mean 'sphere'?)"]),
        (["--baseline", "norm=none,model.norm=none"], ["--baseline", "model.norm is given twice"]),
        (["--threshold", "0.9"], ["error: --threshold: ", "0.95", "0.99"]),
        (["--format", "xlsx"], ["error: --format: ", "markdown"]),
        (["--plot-format", "jpg"], ["error: --plot-format: ", "svg", "pdf"]),
        (["--plot-format", "svg"], ["error: --plot-format: ", "--plots"]),
        (["--baseline", "model.norm=rmsnorm"], ["--baseline", "none, sphere"]),
        (["--baseline", "model.norm"], ["--baseline", "key=value"]),
        (["--baseline", "optim.wd=1"], ["--baseline", "optim.weight_decay"]),
    ],
)
def test_bad_options_exit_2(sweep: Path, args: list[str], needles: list[str]) -> None:
    code, out = invoke(sweep, *args)
    assert code == 2, out
    for needle in needles:
        assert needle in message(out), (needle, out)


def test_by_and_baseline_take_the_names_the_table_shows(sweep: Path) -> None:
    # The table's header says `norm`: a user types it back, in a shell.
    short = analyze_as_typed(sweep, "--by", "norm", "--baseline", "norm=none", "--format", "csv",
                             columns=None)
    dotted = analyze_as_typed(sweep, "--by", "model.norm", "--baseline", "model.norm=none",
                              "--format", "csv", columns=None)
    assert short == dotted and "model.norm=none" in short


def test_missing_or_empty_folder_exits_2(tmp_path: Path) -> None:
    code, out = invoke(tmp_path / "nope")
    assert code == 2 and "does not exist" in message(out)
    code, out = invoke(tmp_path)
    assert code == 2 and message(out).startswith(  # nor a storage folder of sweeps
        f"error: {tmp_path}: not a sweep folder (no runs/ or metrics/ inside) and holds none"
    )


def test_threshold_defaults_to_the_runs_own(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "p1", {"none": [500, 600]}, grok_threshold=0.95)
    code, out = invoke(sweep)
    assert code == 0 and "test_acc >= 0.95" in out
    code, out = invoke(sweep, "--threshold", "0.99")
    assert code == 0 and "test_acc >= 0.99" in out


def test_runs_still_in_progress_or_interrupted_are_noted_and_left_out(sweep: Path) -> None:
    # An interrupted run has a row, but not a final one: --resume finishes it. Counted as not
    # grokked it would bias the success rate; it is left out like a run still running.
    sink = ParquetSink(sweep)
    sink.write_metrics([{"run_id": "in-flight", "step": 0, "train_acc": 0.1, "test_acc": 0.1},
                        {"run_id": "stopped", "step": 0, "train_acc": 0.1, "test_acc": 0.1}])
    sink.write_run({"run_id": "stopped", "status": "interrupted", "steps_run": 0,
                    "censored": False})
    sink.flush()
    result = runner.invoke(app, ["analyze", str(sweep), "--format", "csv"])
    assert result.exit_code == 0
    assert "2 run(s) have not ended (no runs/ row yet, or interrupted" in result.stderr
    assert pd.read_csv(io.StringIO(result.stdout))["n"].tolist() == [3, 3]


def test_a_sweep_whose_every_run_was_interrupted_is_refused_with_the_way_on(
    tmp_path: Path,
) -> None:
    # Right after a Ctrl-C on the first trials every run row says interrupted: analyze and
    # report used to end in a traceback (an empty table), the report after writing half a folder.
    sweep = tmp_path / "stopped"
    sink = ParquetSink(sweep)
    for rid in ("a", "b"):
        row = {**flatten(update(Config(), {"model.norm": "sphere"})), "run_id": rid}
        sink.write_metrics([{"run_id": rid, "step": s, "train_acc": 1.0, "test_acc": 0.1}
                            for s in (0, 100)])
        sink.write_run({**row, "status": "interrupted", "steps_run": 100, "censored": True})
    sink.flush()
    out = tmp_path / "report"
    for args in (["analyze", str(sweep)], ["report", str(sweep), "--out", str(out)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        text = message(result.output)
        assert str(sweep) in text and "no run has ended yet (2 interrupted" in text
        assert "--resume" in text and "--censor-interrupted" in text
    assert not out.exists()  # refused before the report folder was made
    result = runner.invoke(app, ["analyze", str(sweep), "--format", "csv", "--censor-interrupted"])
    assert result.exit_code == 0, result.output
    assert pd.read_csv(io.StringIO(result.stdout))["n"].tolist() == [2]


# ---- the statistics issue's hand-built sweeps, through the command a user types -------------


def write_runs(root: Path, runs: list[tuple[dict, int | None, str, int]]) -> Path:
    """(config overrides, grok step or None, status, steps run) per run; evals every 100."""
    sink = ParquetSink(root)
    for i, (overrides, grok, status, steps_run) in enumerate(runs):
        cfg = update(Config(), {"train.seed": i, **overrides})
        rid = f"r{i}"
        n = steps_run // EVAL + 1
        rows = [
            {"run_id": rid, "step": k * EVAL, "train_acc": 1.0,
             "test_acc": 1.0 if grok is not None and k * EVAL >= grok else 0.1}
            for k in range(n)
        ]
        sink.write_metrics(rows)
        sink.write_run({**flatten(cfg), "run_id": rid, "status": status, "steps_run": steps_run})
    return root


def csv_table(*args: str | Path) -> pd.DataFrame:
    code, out = invoke(*args, "--format", "csv")
    assert code == 0, out
    return pd.read_csv(io.StringIO(out))


def test_a_diverged_run_stays_at_risk_in_analyze(tmp_path: Path) -> None:
    budget = {"train.max_steps": 5000}
    runs = [(budget, g, "completed", g) for g in (1000, 2000, 3000, 4000)]
    runs.append((budget, None, "diverged", 100))
    row = csv_table(write_runs(tmp_path / "div", runs)).iloc[0]
    assert row["km_median"] == 3000 and row["n_failed"] == 1 and row["n_grokked"] == 4


def test_km_median_of_two_runs_is_their_midpoint_in_analyze(tmp_path: Path) -> None:
    runs = [({}, g, "completed", g) for g in (500, 800)]
    row = csv_table(write_runs(tmp_path / "two", runs)).iloc[0]
    assert row["km_median"] == 650 == row["grok_median"]


def test_each_task_is_compared_with_its_own_baseline_in_analyze(tmp_path: Path) -> None:
    groks = {("div", True): 1000, ("div", False): 4000, ("add", True): 900, ("add", False): 2000}
    runs = [
        ({"task.name": t, "task.p": 11, "geomdr.enabled": on}, g + 100 * s, "completed", 9000)
        for (t, on), g in groks.items()
        for s in range(3)
    ]
    sweep = write_runs(tmp_path / "strata", runs)
    by = ("--by", "task.name,geomdr.enabled", "--baseline", "geomdr.enabled=false")
    table = csv_table(sweep, *by)
    rows = table.set_index(["task.name", "geomdr.enabled"])
    assert rows.loc[("div", True), "baseline_group"] == "task=div, GeomDR=false"
    assert rows.loc[("div", True), "speedup"] == pytest.approx(4100 / 1100)
    assert rows.loc[("add", True), "baseline_group"] == "task=add, GeomDR=false"
    code, out = invoke(sweep, *by)
    assert code == 0 and "p Holm" in out and "vs" in out


def test_three_against_three_gives_the_exact_p_in_analyze(tmp_path: Path) -> None:
    runs = [({"model.norm": "none"}, g, "completed", g) for g in (400, 500, 600)]
    runs += [({"model.norm": "sphere"}, g, "completed", g) for g in (100, 200, 300)]
    table = csv_table(write_runs(tmp_path / "sep", runs), "--baseline", "model.norm=none")
    sphere = table.set_index("model.norm").loc["sphere"]
    assert 0.09 <= sphere["p"] <= 0.11 and sphere["p_asymptotic"] < 0.03


def test_paired_needs_matching_seeds_in_analyze(tmp_path: Path) -> None:
    runs = [({"model.norm": "none", "train.seed": s}, 400 + 100 * s, "completed", 900)
            for s in (1, 2)]
    runs += [({"model.norm": "sphere", "train.seed": s}, 100 * s, "completed", 900)
             for s in (1, 2)]
    sweep = write_runs(tmp_path / "pairs", runs)
    table = csv_table(sweep, "--baseline", "model.norm=none", "--paired")
    assert table.set_index("model.norm").loc["sphere", "n_pairs"] == 2
    stray = ({"model.norm": "sphere", "train.seed": 7}, 100, "completed", 900)
    odd = write_runs(tmp_path / "odd", [*runs[:3], stray])
    code, out = invoke(odd, "--baseline", "model.norm=none", "--paired")
    assert code == 2 and "--paired" in message(out) and "seeds" in out


def test_a_threshold_the_runs_stopped_short_of_exits_2(tmp_path: Path) -> None:
    stop = {"train.grok_threshold": 0.95, "train.stop_after_grok": True}
    sink = ParquetSink(tmp_path / "stopped")
    for i in range(2):
        rows = [{"run_id": f"r{i}", "step": s, "train_acc": 1.0, "test_acc": a}
                for s, a in ((0, 0.1), (100, 0.96))]
        sink.write_metrics(rows)
        cfg = flatten(update(Config(), {**stop, "train.seed": i}))
        sink.write_run({**cfg, "run_id": f"r{i}", "status": "grokked", "steps_run": 100})
    code, out = invoke(tmp_path / "stopped", "--threshold", "0.99")
    assert code == 2
    assert "--threshold" in message(out) and "0.95" in out
    code, out = invoke(tmp_path / "stopped", "--threshold", "0.95")
    assert code == 0, out


def strata_sweep(root: Path) -> Path:
    """Two tasks, with and without GeomDR, 3 runs each: 4 groups in 2 strata."""
    groks = {("div", True): 1000, ("div", False): 4000, ("add", True): 900, ("add", False): 2000}
    return write_runs(root, [
        ({"task.name": t, "task.p": 11, "geomdr.enabled": on}, g + 100 * s, "completed", 9000)
        for (t, on), g in groks.items()
        for s in range(3)
    ])


STRATA_ARGS = ("--by", "task.name,geomdr.enabled", "--baseline", "geomdr.enabled=false")


def analyze_as_typed(*args: str | Path, columns: int | None) -> str:
    """`sweepgrok analyze` in a subprocess, its output into a pipe, $COLUMNS as given."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"COLUMNS": str(columns)} if columns else {}
    proc = subprocess.run([sys.executable, "-m", "sweepgrok", "analyze", *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_at_120_columns_the_table_stays_a_table_with_short_headers(tmp_path: Path) -> None:
    out = analyze_as_typed(strata_sweep(tmp_path / "w"), *STRATA_ARGS, columns=120)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 120
    header = re.split(r"\s{2,}", lines[0])
    assert header == ["task", "GeomDR", "grokked", "grok", "delay", "KM", "speed-up", "p", "Holm"]
    rows = [re.split(r"\s{2,}", line) for line in lines[2:6]]  # one line per group
    assert [r[:3] for r in rows] == [["add", "false", "3/3 [44–100%]"],
                                     ["add", "true", "3/3 [44–100%]"],
                                     ["div", "false", "3/3 [44–100%]"],
                                     ["div", "true", "3/3 [44–100%]"]]
    assert rows[3][3:] == ["1,100 [1,000, 1,200] †", "1,100 [1,000, 1,200] †", "1,100",
                           "3.73 [3.33, 4.20]", "0.1", "0.2"]
    legend = " ".join(lines[6:])  # says what the short headers are and what is left out
    assert "KM = Kaplan-Meier median" in legend and "baseline geomdr.enabled=false" in legend
    assert "Left out at this width: mean grok ± se, min–max, vs" in legend


def test_at_80_columns_a_table_without_the_medians_intervals(tmp_path: Path) -> None:
    out = analyze_as_typed(strata_sweep(tmp_path / "w"), *STRATA_ARGS, columns=80)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80
    assert re.split(r"\s{2,}", lines[0]) == ["task", "GeomDR", "grokked", "grok", "delay", "KM",
                                             "speed-up", "p", "Holm"]
    assert re.split(r"\s{2,}", lines[5]) == ["div", "true", "3/3 [44–100%]", "1,100", "1,100",
                                             "1,100", "3.73 [3.33, 4.20]", "0.1", "0.2"]
    assert "(their CIs left out at this width)" in " ".join(lines[6:])


def test_under_80_columns_each_group_is_a_block_of_lines(tmp_path: Path) -> None:
    out = analyze_as_typed(strata_sweep(tmp_path / "w"), *STRATA_ARGS, columns=70)
    assert max(len(line) for line in out.splitlines()) <= 70
    # Every group and every number is still there, under unambiguous labels.
    for cell in ("task=div, GeomDR=true", "3/3 100%", "KM median", "p (exact)", "p Holm",
                 "mean grok ± se", "min–max", "1,100 [1,000, 1,200] †"):
        assert cell in out
    assert "name=" not in out and "enabled=" not in out


def test_into_a_pipe_the_table_and_legend_are_never_wrapped(tmp_path: Path) -> None:
    out = analyze_as_typed(strata_sweep(tmp_path / "w"), *STRATA_ARGS, columns=None)
    lines = out.splitlines()
    # Header, rule, a line per group, the legend on one line; then, after a blank line, the
    # result line and the grouping note, each one line however long.
    assert len(lines) == 2 + 4 + 1 + 3 and lines[7] == "" and lines[8].startswith("Result: ")
    assert lines[0].startswith("task  GeomDR  grokked") and len(lines[0]) <= 120
    wide = analyze_as_typed(strata_sweep(tmp_path / "w2"), *STRATA_ARGS, columns=250)
    assert "mean grok ± se" in wide.splitlines()[0]  # every column where it fits


def test_censor_interrupted_keeps_an_interrupted_run_and_says_so(
    sweep: Path, tmp_path: Path
) -> None:
    sink = ParquetSink(sweep)
    row = {**flatten(update(Config(), {"model.norm": "sphere"})), "run_id": "stopped"}
    sink.write_metrics([{"run_id": "stopped", "step": s, "train_acc": 1.0, "test_acc": 0.1}
                        for s in (0, 100)])
    sink.write_run({**row, "status": "interrupted", "steps_run": 100, "censored": True})
    sink.flush()
    args = ["analyze", str(sweep), "--format", "csv", "--censor-interrupted"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 interrupted run(s) kept (--censor-interrupted)" in result.stderr
    table = pd.read_csv(io.StringIO(result.stdout)).set_index("model.norm")
    assert table.loc["sphere", "n"] == 4 and table.loc["sphere", "n_grokked"] == 3
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(sweep), "--out", str(out), "--censor-interrupted"])
    assert result.exit_code == 0, result.output
    assert "1 interrupted run(s) kept (--censor-interrupted)" in (out / "report.md").read_text()
    assert "stopped" in pd.read_csv(out / "runs.csv")["run_id"].tolist()


def _train(out: Path) -> None:
    """`sweepgrok train` of one tiny config into `out` (its run id: a hash of the config)."""
    trial = str(Path(__file__).parents[2] / "search_spaces/trials/trial_quick.yaml")
    res = runner.invoke(app, ["train", trial, "--quiet", "--set", "train.max_steps=20",
                              "--set", "task.p=11", "--set", "train.eval_every=10",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output


def test_two_train_folders_of_one_config_are_two_sets_of_runs(tmp_path: Path) -> None:
    # The same config gives the same run id in both folders: --by sweep shows both folders,
    # each with its run, and the second folder's run keeps its own rows under its own id.
    first, second = tmp_path / "int_train", tmp_path / "int_ref"
    _train(first)
    _train(second)
    code, out = invoke(first, second, "--by", "sweep", "--format", "csv")
    assert code == 0, out
    assert pd.read_csv(io.StringIO(out)).set_index("sweep")["n"].to_dict() == {
        "int_train": 1, "int_ref": 1}
    metrics, runs = stats.read_sweeps([first, second], keep_repeats=True)
    (run_id,) = pd.read_parquet(first / "runs")["run_id"]
    assert runs["run_id"].tolist() == [run_id, f"int_ref/{run_id}"]
    evaluations = len(pd.read_parquet(first / "metrics"))
    assert metrics.groupby("run_id").size().tolist() == [evaluations, evaluations]


def test_the_same_config_and_seed_from_two_sweeps_counts_once_with_a_note(
    sweep: Path, tmp_path: Path
) -> None:
    # "again" repeats every run of "quick" (same configs, same seeds) under other run ids.
    again = write_sweep(tmp_path / "again", GROKS)
    proc = subprocess.run([SWEEPGROK, "analyze", str(sweep), str(again), "--format", "csv"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    counts = pd.read_csv(io.StringIO(proc.stdout)).set_index("model.norm")["n"].to_dict()
    assert counts == {"none": 3, "sphere": 3}  # not 6 and 6: one seed counts once
    note = " ".join(proc.stderr.split())
    assert "left out 6 run(s) that repeat a run of a folder given before them" in note
    assert f"6 from {again}" in note and "--by sweep" in note
    code, out = invoke(sweep, again, "--format", "csv", "--by", "sweep")
    assert code == 0, out
    assert pd.read_csv(io.StringIO(out)).set_index("sweep")["n"].to_dict() == {
        "again": 6, "quick": 6}


def test_by_sweep_separates_two_folders_of_one_name(tmp_path: Path) -> None:
    a = write_sweep(tmp_path / "a" / "quick", GROKS)
    b = write_sweep(tmp_path / "b" / "quick", {"sphere": [100, 100]}, seed0=10)
    code, out = invoke(a, b, "--format", "csv", "--by", "sweep")
    assert code == 0, out
    assert pd.read_csv(io.StringIO(out)).set_index("sweep")["n"].to_dict() == {
        "a/quick": 6, "b/quick": 2}


def test_into_a_pipe_a_warning_is_one_line_neither_wrapped_nor_padded(tmp_path: Path) -> None:
    sweep = strata_sweep(tmp_path / ("a_sweep_with_a_name_long_enough_to_pass_80_columns_" * 2))
    (sweep / "runs" / "part-9999999999999-deadbeef.parquet").write_bytes(b"junk")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [sys.executable, "-m", "sweepgrok", "analyze", str(sweep), "--skip-damaged", "--format",
         "csv"], env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.splitlines()  # rich's log handler padded it to the console's width
    assert line.startswith(f"WARNING  {sweep}: runs/part-9999999999999-deadbeef.parquet: ")
    assert line.endswith("left out (damaged)")
