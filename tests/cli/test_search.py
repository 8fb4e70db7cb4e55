"""`sweepgrok search`: refusals before anything is written (a bad file, an existing study
without --resume, a changed space on --resume) and the dashboard command it prints. A search
that runs: tests/e2e/test_search_e2e.py; the study itself: tests/search/test_study.py."""

from __future__ import annotations

import pytest
from conftest import one_line_error, write_search
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.config.search_file import load_search
from sweepgrok.search import study as S

runner = CliRunner()


def test_a_bad_file_exits_2_without_traceback_and_writes_nothing(tmp_path):
    path = write_search(
        tmp_path,
        {"space": {"geomdr.lambda_max": {"loguniform": [0, 1]}}},
        storage=str(tmp_path / "out"),
    )
    res = runner.invoke(app, ["search", str(path)])
    assert res.exit_code == 2 and "geomdr.lambda_max" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "out").exists()


def test_an_existing_study_is_refused_without_resume(tmp_path):
    path = write_search(tmp_path, storage=str(tmp_path / "out"))
    spec = load_search(path)
    S.write_study_record(spec.sweep_dir(), S.new_study_record(spec, spec.sweep_dir()))
    res = runner.invoke(app, ["search", str(path)])
    assert res.exit_code == 2 and "--resume" in res.output
    res = runner.invoke(app, ["search", str(path), "--resume", "--fresh"])
    assert res.exit_code == 2


def test_resume_refuses_a_changed_space(tmp_path):
    path = write_search(tmp_path, storage=str(tmp_path / "out"))
    spec = load_search(path)
    S.write_study_record(spec.sweep_dir(), S.new_study_record(spec, spec.sweep_dir()))
    write_search(
        tmp_path, {"space": {"geomdr.start_step": {"int": [0, 600]}}}, storage=str(tmp_path / "out")
    )
    res = runner.invoke(app, ["search", str(path), "--resume"])
    assert res.exit_code == 2 and "changed" in res.output


def test_a_missing_file_exits_2_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the default storage, runs/, would go
    missing = tmp_path / "nope.yaml"
    res = runner.invoke(app, ["search", str(missing)])
    assert res.exit_code == 2 and str(missing) in one_line_error(res.output)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("installed", [True, False])
def test_the_dashboard_command_is_printed_on_one_line(tmp_path, monkeypatch, capsys, installed):
    import importlib.util
    import shlex

    from sweepgrok.cli.search import print_dashboard_command

    real = importlib.util.find_spec
    missing = {"optuna_dashboard"} if not installed else set()
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a)
    )
    deep = tmp_path / ("a-long-folder-name-" * 6) / "with space"
    record = S.new_study_record(load_search(write_search(tmp_path)), deep)
    print_dashboard_command(record)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    command = shlex.join(S.dashboard_command(record))
    hint = "pip install 'sweepgrok[dashboard]', then " if not installed else ""
    assert lines[0] == f"study dashboard: {hint}{command}"
    assert shlex.split(command)[1] == f"sqlite:///{deep / 'optuna.db'}"
