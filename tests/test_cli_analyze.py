"""`sweepgrok analyze` through CliRunner: every format, several folders, plots, and exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sweepgrok import comparisons, stats
from sweepgrok.cli import app
from sweepgrok.config import Config, flatten, update
from sweepgrok.sink import ParquetSink

runner = CliRunner()
EVAL = 100
N_EVALS = 11  # steps 0..1000


def _curve(grok_at: int | None) -> list[float]:
    return [1.0 if grok_at is not None and i * EVAL >= grok_at else 0.1 for i in range(N_EVALS)]


def write_sweep(
    root: Path, groks: dict[str, list[int | None]], seed0: int = 0, grok_threshold: float = 0.99
) -> Path:
    """Runs with complete config rows: model.norm -> grok steps per seed (None = censored)."""
    sink = ParquetSink(root)
    for norm, steps in groks.items():
        for i, grok in enumerate(steps):
            overrides = {"model.norm": norm, "train.seed": seed0 + i}
            cfg = update(Config(), {**overrides, "train.grok_threshold": grok_threshold})
            run_id = f"{root.name}-{norm}-{i}"
            curve = _curve(grok)
            sink.write_metrics(
                [
                    {
                        "run_id": run_id,
                        "step": k * EVAL,
                        "train_acc": 1.0,
                        "test_acc": acc,
                        "deff": 20.0 - k,
                    }
                    for k, acc in enumerate(curve)
                ]
            )
            status = "censored" if grok is None else "completed"
            steps_run = (N_EVALS - 1) * EVAL
            sink.write_run(
                {**flatten(cfg), "run_id": run_id, "status": status, "steps_run": steps_run}
            )
    return root


GROKS: dict[str, list[int | None]] = {"none": [800, 900, None], "sphere": [200, 300, 300]}


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "quick", GROKS)


def invoke(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, ["analyze", *map(str, args)])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def message(out: str) -> str:
    """The one error line (``error: <where>: <message>``); fails on anything else."""
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    return lines[0]


def test_table_is_the_default(sweep: Path) -> None:
    code, out = invoke(sweep, "--baseline", "model.norm=none")
    assert code == 0, out
    assert "norm" in out and "KM median" in out and "p (exact)" in out
    (sphere_line,) = [line for line in out.splitlines() if "sphere" in line]
    assert "3/3 100%" in sphere_line and "300" in sphere_line
    (none_line,) = [line for line in out.splitlines() if "│ none" in line]
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
    assert {"accuracy.png", "grok_times.png", "survival.png", "deff.png"} <= names


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
        (["--by", "model.nrom"], ["error: --by: ", "model.norm"]),
        (["--threshold", "0.9"], ["error: --threshold: ", "0.95", "0.99"]),
        (["--format", "xlsx"], ["error: --format: ", "markdown"]),
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


def test_missing_or_empty_folder_exits_2(tmp_path: Path) -> None:
    code, out = invoke(tmp_path / "nope")
    assert code == 2 and "does not exist" in message(out)
    code, out = invoke(tmp_path)
    assert code == 2 and message(out) == (
        f"error: {tmp_path}: not a sweep folder (no runs/ or metrics/ inside)"
    )


def test_report_script(
    sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # `analysis` package
    from analysis import report

    out = tmp_path / "report"
    argv = [str(sweep), "--out", str(out)]
    assert report.main([*argv, "--baseline", "model.norm=none"]) == 0
    text = (out / "report.md").read_text()
    assert "## Grokking at test accuracy >= 0.95" in text and "| sphere | 3/3 100%" in text
    assert (out / "figures" / "survival.png").is_file() and (out / "runs.csv").is_file()
    capsys.readouterr()
    assert report.main([*argv, "--by", "model.nrom"]) == 2
    assert message(capsys.readouterr().err).startswith("error: --by: ")
    with pytest.raises(SystemExit) as exit_info:
        report.main([*argv, "--threshold", "0.9"])
    assert exit_info.value.code == 2
    assert message(capsys.readouterr().err).startswith("error: argument --threshold: ")


def test_report_command_writes_the_same_report(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    args = ["report", str(sweep), "--out", str(out), "--baseline", "model.norm=none"]
    result = runner.invoke(app, [*args, "--threshold", "0.95"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote {out / 'report.md'}"
    text = (out / "report.md").read_text()
    assert "| sphere | 3/3 100%" in text and "## Figures (grok = test accuracy >= 0.95)" in text
    assert {p.name for p in out.iterdir()} >= {"runs.csv", "groups_95.csv", "groups_99.csv"}
    assert (out / "figures" / "survival.png").is_file()
    result = runner.invoke(app, ["report", str(sweep), "--out", str(out), "--by", "model.nrom"])
    assert result.exit_code == 2 and message(result.output).startswith("error: --by: ")
    result = runner.invoke(app, ["report", str(sweep)])
    assert result.exit_code == 2 and "--out" in message(result.output)


def test_threshold_defaults_to_the_runs_own(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path / "p1", {"none": [500, 600]}, grok_threshold=0.95)
    code, out = invoke(sweep)
    assert code == 0 and "test_acc >= 0.95" in out
    code, out = invoke(sweep, "--threshold", "0.99")
    assert code == 0 and "test_acc >= 0.99" in out


def test_runs_still_in_progress_are_noted_and_left_out(sweep: Path) -> None:
    sink = ParquetSink(sweep)
    sink.write_metrics([{"run_id": "in-flight", "step": 0, "train_acc": 0.1, "test_acc": 0.1}])
    sink.flush()
    result = runner.invoke(app, ["analyze", str(sweep), "--format", "csv"])
    assert result.exit_code == 0
    assert "1 run(s) have metrics but no runs/ row" in result.stderr
    assert pd.read_csv(io.StringIO(result.stdout))["n"].tolist() == [3, 3]
