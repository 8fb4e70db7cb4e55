"""`sweepgrok status`: its JSON keys and table for a sweep folder caught mid-sweep
(conftest.write_midsweep; what the states mean: tests/analysis/test_sweepstatus.py), its
refusals (not a sweep folder, a storage folder, a damaged part) and --watch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import one_line_error, write_midsweep
from typer.testing import CliRunner

from sweepgrok.cli import app

runner = CliRunner()
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")

JSON_KEYS = {
    "sweep_dir", "kind", "trials", "runs", "groups", "search", "last_write",
    "seconds_since_write", "mean_trial_s", "time_left_s", "driver", "notes",
}
TRIAL_KEYS = {"total", "done", "running", "pending", "failed", "interrupted"}
GROUP_KEYS = {"group", "label", "runs", "grokked", "grok_median", "km_median"}


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_midsweep(tmp_path / "st")


def test_json_has_the_documented_keys(sweep: Path) -> None:
    res = runner.invoke(app, ["status", str(sweep), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == JSON_KEYS
    assert set(doc["trials"]) == TRIAL_KEYS and doc["trials"]["total"] == 6
    assert set(doc["runs"]) == {"recorded", "grokked", "threshold"}
    assert all(set(g) == GROUP_KEYS for g in doc["groups"]) and len(doc["groups"]) == 2
    assert doc["search"] is None and doc["time_left_s"] == 250.0
    assert doc["last_write"].endswith("Z")


def test_table_names_states_and_groups(sweep: Path) -> None:
    res = runner.invoke(app, ["status", str(sweep)])
    assert res.exit_code == 0, res.output
    assert "2/6 done, 1 running, 2 pending, 1 failed" in res.stdout
    assert "norm=none" in res.stdout and "~4m10s" in res.stdout  # 250 s left


def test_not_a_sweep_folder_exits_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    for folder in (tmp_path, tmp_path / "missing"):
        res = runner.invoke(app, ["status", str(folder)])
        assert res.exit_code == 2
        assert "not a sweep folder" in one_line_error(res.output)


def test_a_storage_folder_is_pointed_at_ls(sweep: Path) -> None:
    # The folder above sweep folders, typed where a sweep folder belongs.
    storage = sweep.parent
    res = subprocess.run([SWEEPGROK, "status", str(storage)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and not res.stdout
    assert one_line_error(res.stderr) == (
        f"error: {storage}: a storage folder holding 1 sweep folder(s) ({sweep.name}), not a "
        f"sweep folder: `sweepgrok ls {storage}` lists them, `sweepgrok status {sweep}` shows one"
    )


def test_a_damaged_part_exits_2_unless_skipped(sweep: Path) -> None:
    bad = sweep / "runs" / "part-9999999999999-deadbeef.parquet"
    bad.write_bytes(b"not parquet")
    res = runner.invoke(app, ["status", str(sweep)])
    assert res.exit_code == 2 and "runs/part-9999999999999-deadbeef.parquet" in one_line_error(
        res.output)
    res = runner.invoke(app, ["status", str(sweep), "--skip-damaged", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["runs"]["recorded"] == 3


def test_watch_in_a_pipe_prints_again_and_ctrl_c_exits_130_with_one_line(sweep: Path) -> None:
    # A real process, as typed: its stdout is a pipe, so --watch prints plain JSON documents.
    # SIGINT at its default, as in a terminal's foreground job: a background job of a shell
    # without job control (`make test &`) inherits it ignored, and Python keeps it ignored.
    proc = subprocess.Popen(
        [SWEEPGROK, "status", str(sweep), "--watch", "--every", "0.5", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # blocks until the command prints: no sleep
        lines.append(line)
        if line.startswith("}") and len([x for x in lines if x.startswith("}")]) == 2:
            break
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: a terminal signals the process group
    # communicate reads both pipes while it waits: a watch that printed on into a full stdout
    # pipe would otherwise wait on this test (seen once in a fresh-clone `make test`).
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.splitlines() == [f"stopped watching {sweep} (the sweep itself goes on)"]
    first = "".join(lines).split("}\n{")[0] + "}"
    assert json.loads(first)["trials"]["done"] == 2
