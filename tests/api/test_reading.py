"""sweepgrok.api.reading: the readers and the analysis take a folder, several, or a storage
folder; the CLI's analyze prints the table sg.analyze returns; a report is written; a damaged
part or a missing folder is a ConfigError with the command's message."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import GROKS, write_sweep

import sweepgrok as sg
from sweepgrok.train.recorder import Recorder


def test_readers_take_a_storage_folder_and_analyze_groups(tmp_path: Path) -> None:
    write_sweep(tmp_path / "store" / "s", GROKS)
    runs = sg.read_runs(tmp_path / "store")
    assert sorted(runs["model.norm"]) == ["none"] * 3 + ["sphere"] * 3
    table = sg.analyze([tmp_path / "store" / "s"], by=["model.norm"], baseline="model.norm=none")
    assert isinstance(table, pd.DataFrame) and len(table) == 2
    assert table.set_index("model.norm")["n_grokked"].to_dict() == {"none": 2, "sphere": 3}


def test_read_metrics_keeps_a_recorders_extra_columns(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r", {"train": {"max_steps": 30}}, flush_every=1)
    rec.log(0, train_acc=0.1, test_acc=0.0)  # its part has no extra column
    rec.log(10, train_acc=0.5, test_acc=0.0, sharpness=2.5)
    rec.log(20, train_acc=1.0, test_acc=0.2, sharpness=1.5, lr=1e-3)
    rec.finish()
    metrics = sg.read_metrics(tmp_path / "r")
    assert metrics["step"].tolist() == [0, 10, 20]
    assert metrics["sharpness"].tolist()[1:] == [2.5, 1.5] and pd.isna(metrics["sharpness"][0])
    assert metrics["lr"].tolist()[2] == 1e-3  # a known column: in the schema's place
    # A plain reader takes the first part's columns: one without the metric hides it there
    assert "sharpness" not in pd.read_parquet(tmp_path / "r" / "metrics")


def test_report_writes_its_folder(tmp_path: Path) -> None:
    write_sweep(tmp_path / "s", GROKS)
    path = sg.report(tmp_path / "s", tmp_path / "rep")
    assert path == tmp_path / "rep" / "report.md" and path.read_text().startswith("#")


def test_missing_folder_and_damaged_part_raise_config_error(tmp_path: Path) -> None:
    with pytest.raises(sg.ConfigError, match=r"^SWEEP_DIR: .*nowhere: no such folder$"):
        sg.read_runs(tmp_path / "nowhere")
    write_sweep(tmp_path / "s", GROKS)
    part = next((tmp_path / "s" / "runs").glob("*.parquet"))
    part.write_bytes(b"not parquet")
    with pytest.raises(sg.ConfigError, match=r"runs/part-.*: move it aside"):
        sg.analyze(tmp_path / "s")
