"""`sweepgrok train`: CliRunner for the edges, a real subprocess for the user's command."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sweepgrok.cli import app

ROOT = Path(__file__).parents[2]
runner = CliRunner()


def test_bad_override_exits_2_naming_the_key(tmp_path):
    res = runner.invoke(app, ["train", str(ROOT / "search_spaces/trials/trial_quick.yaml"),
                              "--set", "model.norm=batchnorm", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "model.norm" in res.output and "sphere" in res.output
    assert not (tmp_path / "o").exists()


def test_missing_file_and_unknown_key_exit_2(tmp_path):
    res = runner.invoke(app, ["train", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2 and "cannot read" in res.output
    res = runner.invoke(app, ["train", str(ROOT / "search_spaces/trials/trial_quick.yaml"),
                              "--set", "train.maxsteps=3"])
    assert res.exit_code == 2 and "train.maxsteps" in res.output and "max_steps" in res.output


def test_train_writes_a_sweep_folder(tmp_path):
    trial = str(ROOT / "search_spaces/trials/trial_quick.yaml")
    res = runner.invoke(app, ["train", trial, "--quiet",
                              "--set", "train.max_steps=20", "--set", "task.p=11",
                              "--set", "train.eval_every=10", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    runs = pd.read_parquet(tmp_path / "o" / "runs")
    assert runs.loc[0, "steps_run"] == 20 and runs.loc[0, "task.p"] == 11


# Groks in under a minute on 2 quiet cores; 310 s measured on 2 heavily shared ones.
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_trial_groks_as_a_real_command(tmp_path):
    # The user's command, in a subprocess: sphere on p=47 groks long after it fits.
    env = dict(os.environ)
    out = tmp_path / "q"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "sweepgrok"), "train",
         "search_spaces/trials/trial_quick.yaml", "--out", str(out), "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    run = pd.read_parquet(out / "runs").iloc[0]
    assert run["status"] == "grokked" and run["fit_step"] < run["grok_step"]
    assert run["git_commit"] is not None and run["torch_version"]
    m = pd.read_parquet(out / "metrics")
    at_fit = m[m["step"] == run["fit_step"]].iloc[0]
    assert at_fit["train_acc"] >= 0.99 and at_fit["test_acc"] < 0.95  # memorized first


def test_the_closing_table_prints_a_dash_for_an_absent_value(capsys):
    from sweepgrok.cli.train import _print_runs

    row = {"run_id": "a_00000", "train.seed": 1, "status": "censored", "fit_step": 250,
           "grok_step": None, "steps_run": 3000}
    _print_runs([row, {**row, "run_id": "a_00001", "fit_step": float("nan")}], Path("runs/x"))
    out = capsys.readouterr().out
    assert "None" not in out and "nan" not in out
    assert out.count(" - ") == 3  # two absent grok steps, one absent fit step


def test_a_checkout_is_dirty_only_with_uncommitted_changes_to_tracked_files(tmp_path):
    """sweepgrok.store.provenance.checkout_dirty on a real git repository: clean after a commit,
    dirty once a tracked file changes, clean again when only an untracked file is added."""
    from sweepgrok.store.provenance import checkout_dirty

    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    assert checkout_dirty(tmp_path) is None  # not a checkout
    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-qm", "code")
    assert checkout_dirty(tmp_path) is False
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert checkout_dirty(tmp_path) is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert checkout_dirty(tmp_path) is True


def test_train_and_report_record_what_a_rerun_must_match(tmp_path):
    """The user's commands in subprocesses: `sweepgrok train` writes torch's version and build,
    the device and what it is, and the checkout's commit and dirty flag into its run row, and
    `sweepgrok report` keeps them in runs.csv (read back with pandas)."""
    from importlib import metadata

    bin_dir = Path(sys.executable).parent
    out, report = tmp_path / "t", tmp_path / "r"
    train = [str(bin_dir / "sweepgrok"), "train", "search_spaces/trials/trial_quick.yaml",
             "--quiet", "--set", "train.max_steps=20", "--set", "task.p=11",
             "--set", "train.eval_every=10", "--set", "train.device=cpu", "--out", str(out)]
    proc = subprocess.run(train, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([str(bin_dir / "sweepgrok"), "report", str(out), "--out", str(report)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                            capture_output=True, text=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    row = pd.read_parquet(out / "runs").iloc[0]
    summary = pd.read_csv(report / "runs.csv").iloc[0]
    for got in (row, summary):
        if head.returncode:  # not run from a git checkout (an unpacked release): both unknown
            assert pd.isna(got["git_commit"]) and pd.isna(got["git_dirty"])
        else:
            assert got["git_commit"] == head.stdout.strip()
            assert bool(got["git_dirty"]) is bool(status.stdout.strip())
        assert got["torch_version"] == metadata.version("torch")
        assert got["torch_build"].startswith("git ") and got["device"] == "cpu"
        assert "torch kernels " in got["device_name"]
def _refused(*args: str) -> str:
    """`sweepgrok train ARGS` in a subprocess, as typed: exit 2 and its one error line."""
    proc = subprocess.run([sys.executable, "-m", "sweepgrok", "train", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()
    return line


def test_a_refused_value_is_blamed_on_the_set_that_gave_it(tmp_path):
    trial = tmp_path / "trial.yaml"
    trial.write_text("model: {d_model: 64, n_heads: 4}\n")
    assert _refused(str(trial), "--set", "model.norm=layer_norm") == (
        "error: --set model.norm=layer_norm: model.norm: must be one of none, layernorm, "
        "rmsnorm, sphere, got 'layer_norm' (did you mean 'layernorm'?)"
    )
    # A check across a section's keys: the file and the --set that changed the section.
    assert _refused(str(trial), "--set", "model.d_model=30").startswith(
        f"error: {trial} with --set model.d_model=30: model: model.d_model (30) must be "
    )
    trial.write_text("model: {norm: layer_norm}\n")  # the file's own value: the file
    assert _refused(str(trial), "--set", "model.d_model=64").startswith(
        f"error: {trial}: model.norm: must be one of"
    )
