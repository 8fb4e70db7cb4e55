"""analysis.provenance_summaries: every committed run summary row names its code commit and
sweepgrok
version, copied from a sweep's real Parquet run rows, or marked unknown, never guessed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from analysis import provenance_summaries as provenance
from sweepgrok.store.sink import read_runs

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "fixture_sweep_v0.1.0"


def test_every_committed_summary_row_carries_its_provenance() -> None:
    summaries = sorted((ROOT / "analysis").glob("**/runs.csv"))
    assert len(summaries) >= 12
    for path in summaries:
        runs = pd.read_csv(path)
        for column in provenance.COLUMNS:
            hint = "run python -m analysis.provenance_summaries"
            assert column in runs, f"{path}: no {column}: {hint}"
            assert runs[column].notna().all() and (runs[column] != "").all(), path


def test_the_parquet_rows_provenance_is_copied_per_run(tmp_path: Path) -> None:
    """The fixture sweep's one run was recorded by sweepgrok 0.1.0: its summary gets that
    version and the commit its row holds; a run the Parquet lacks is unknown."""
    rows = read_runs(FIXTURE)
    rid = rows["run_id"].iloc[0]
    summary = pd.DataFrame({"run_id": [rid, "gone"], "git_commit": ["stale", "stale"]})
    out = provenance.add_provenance(summary, rows)
    assert out["sweepgrok_version"].tolist() == ["0.1.0", provenance.UNKNOWN]
    assert out["git_commit"].tolist() == [rows["git_commit"].iloc[0], provenance.UNKNOWN]


def test_code_versions_names_a_mix() -> None:
    mixed = pd.DataFrame({"git_commit": ["a" * 40, "b" * 40, "a" * 40]})
    assert provenance.code_versions(mixed) == "aaaaaaa + bbbbbbb"
    assert provenance.code_versions(pd.DataFrame({"run_id": ["r"]})) == provenance.UNKNOWN


def test_marking_unknown_keeps_every_other_character(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    text = 'run_id,steps,betas,git_commit\nr1,500,"[0.9, 0.98]",abc\nr2,,"[0.9, 0.98]",\n'
    path.write_text(text)
    provenance.mark_unknown(path)
    u = provenance.UNKNOWN
    assert path.read_text() == (
        f"run_id,steps,betas,git_commit,sweepgrok_version\n"
        f'r1,500,"[0.9, 0.98]",abc,{u}\nr2,,"[0.9, 0.98]",{u},{u}\n'
    )


def test_the_cli_writes_the_columns_and_exits_2_on_a_missing_summary(tmp_path: Path) -> None:
    folder = tmp_path / "summary"
    folder.mkdir()
    rid = read_runs(FIXTURE)["run_id"].iloc[0]
    pd.DataFrame({"run_id": [rid], "grok_step_95": [100]}).to_csv(folder / "runs.csv", index=False)
    sweep = tmp_path / "sweep"
    shutil.copytree(FIXTURE, sweep)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "analysis.provenance_summaries", *args]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert cli(str(sweep), str(folder)).returncode == 0
    assert pd.read_csv(folder / "runs.csv")["sweepgrok_version"].tolist() == ["0.1.0"]
    missing = cli("--unknown", str(tmp_path / "nothing"))
    assert missing.returncode == 2
    assert (
        missing.stderr.startswith("error: ") and "nothing/runs.csv: no such file" in missing.stderr
    )
