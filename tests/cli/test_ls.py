"""Several sweeps at once: `sweepgrok ls STORAGE`, and `analyze` / `report` given a storage folder
(the parent of several sweep folders) or several sweep folders, `sweep` a grouping key.

Real sweep folders: two written through the Parquet sink (test_cli_analyze.write_sweep: known
grok steps) and the committed 0.1.0 grid sweep (sweep.yaml, Tune state), copied.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import one_line_error, write_sweep

from sweepgrok.store.sink import ParquetSink, read_table

DATA = Path(__file__).parents[1] / "data"
WRITTEN = 1_700_000_000  # 2023-11-14T22:13:20Z: each sweep's files get a known write time


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real `sweepgrok` command, in a subprocess."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "sweepgrok", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def touch_all(folder: Path, when: int) -> None:
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (when, when))


def sweep(root: Path, groks: dict[str, list[int | None]]) -> None:
    """write_sweep's runs, their runs/ rows with the grok step a driver writes (ls reads runs/
    alone; analyze recomputes it from metrics/)."""
    write_sweep(root, groks)
    sink = ParquetSink(root)
    for row in read_table(root, "runs").to_pylist():
        index = int(row["run_id"].rsplit("-", 1)[1])
        grok = groks[row["model.norm"]][index]
        sink.write_run({**row, "grok_step": grok, "grok_step_95": grok, "grok_step_99": grok})
    sink.flush()


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    """runs/alpha (3 runs, 2 grokked), runs/beta (2 runs, 2 grokked), runs/grid (the 0.1.0
    fixture: a grid of 3 trials, 1 done, its run not grokked), and a folder that is no sweep."""
    root = tmp_path / "runs"
    sweep(root / "alpha", {"none": [800, None], "sphere": [200]})
    sweep(root / "beta", {"none": [700], "sphere": [300]})
    shutil.copytree(DATA / "fixture_sweep_v0.1.0", root / "grid")
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("not a sweep\n")
    for i, name in enumerate(("alpha", "beta", "grid")):
        touch_all(root / name, WRITTEN + 60 * i)
    return root


def test_ls_prints_one_line_per_sweep(storage: Path) -> None:
    res = cli("ls", str(storage))
    assert res.returncode == 0, res.stderr
    lines = [re.sub(r"\s+", " ", line) for line in res.stdout.splitlines()]
    assert lines == [
        "alpha runs 3/3 trials done 2/3 runs grokked last write 2023-11-14T22:13:20Z",
        "beta runs 2/2 trials done 2/2 runs grokked last write 2023-11-14T22:14:20Z",
        "grid grid 1/3 trials done 0/1 runs grokked last write 2023-11-14T22:15:20Z",
    ]


def test_ls_of_a_folder_without_sweeps_exits_2(storage: Path) -> None:
    res = cli("ls", str(storage / "notes"))
    assert res.returncode == 2
    assert one_line_error(res.stderr).startswith(f"error: {storage / 'notes'}: holds no sweep")
    assert cli("ls", str(storage / "missing")).returncode == 2


def analyze_csv(*args: str) -> pd.DataFrame:
    res = cli("analyze", *args, "--format", "csv")
    assert res.returncode == 0, res.stderr
    return pd.read_csv(io.StringIO(res.stdout))


def test_analyze_reads_a_storage_folder_as_its_sweeps(storage: Path) -> None:
    whole = analyze_csv(str(storage))
    listed = analyze_csv(*(str(storage / n) for n in ("alpha", "beta", "grid")))
    pd.testing.assert_frame_equal(whole, listed)
    by_sweep = analyze_csv(str(storage), "--by", "sweep")
    got = dict(zip(by_sweep["sweep"], zip(by_sweep["n"], by_sweep["n_grokked"], strict=True),
                   strict=True))
    assert got == {"alpha": (3, 2), "beta": (2, 2), "fixture_sweep_v0.1.0": (1, 0)}


def test_analyze_by_sweep_and_a_key_across_two_sweeps(storage: Path) -> None:
    table = analyze_csv(str(storage / "alpha"), str(storage / "beta"),
                        "--by", "sweep,model.norm")
    rows = {(s, n): (k, g) for s, n, k, g in
            zip(table["sweep"], table["model.norm"], table["n"], table["n_grokked"], strict=True)}
    assert rows == {("alpha", "none"): (2, 1), ("alpha", "sphere"): (1, 1),
                    ("beta", "none"): (1, 1), ("beta", "sphere"): (1, 1)}


def test_analyze_and_report_refuse_a_folder_that_holds_no_sweep(
    storage: Path, tmp_path: Path
) -> None:
    for command in (["analyze", str(storage / "notes")],
                    ["report", str(storage / "notes"), "--out", str(tmp_path / "rep")]):
        res = cli(*command)
        assert res.returncode == 2
        assert "not a sweep folder (no runs/ or metrics/ inside) and holds none" in (
            one_line_error(res.stderr))
    assert not (tmp_path / "rep").exists()


@pytest.mark.slow
def test_report_of_a_storage_folder_covers_every_sweep(storage: Path, tmp_path: Path) -> None:
    res = cli("report", str(storage), "--out", str(tmp_path / "rep"), "--by", "sweep")
    assert res.returncode == 0, res.stderr
    runs = pd.read_csv(tmp_path / "rep" / "runs.csv")
    assert sorted(runs["sweep"].unique()) == ["alpha", "beta", "fixture_sweep_v0.1.0"]
