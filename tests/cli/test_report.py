"""`sweepgrok report`: the report folder (report.md, figures, CSV tables) of a hand-built sweep,
its refusals, and the words a report adds for what the runs vary (what analyze prints:
tests/cli/test_analyze.py; the report's content: tests/analysis/test_report_content.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GROKS, write_sweep
from conftest import one_line_error as message
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.trial import Config, flatten, update
from sweepgrok.store.sink import ParquetSink

runner = CliRunner()


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "quick", GROKS)


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


def test_a_report_grouped_by_wd_under_adam_says_wd_is_an_l2_term(tmp_path: Path) -> None:
    sweep = tmp_path / "adam"
    sink = ParquetSink(sweep)
    for i, wd in enumerate((0.0, 0.0, 0.005, 0.005)):
        overrides = {"optim.optimizer": "adam", "optim.weight_decay": wd, "train.seed": i}
        row = {**flatten(update(Config(), overrides)), "run_id": f"r{i}"}
        sink.write_metrics([{"run_id": f"r{i}", "step": s, "train_acc": 1.0, "test_acc": acc}
                            for s, acc in ((0, 0.1), (100, 0.99))])
        sink.write_run({**row, "status": "grokked", "steps_run": 100, "censored": False})
    sink.flush()
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(sweep), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "report.md").read_text()
    assert "Grouped by the keys that vary across runs: `optim.weight_decay`." in text
    assert "`wd` (`optim.weight_decay`) is the L2 coefficient added to the gradient" in text
