"""Every shipped YAML validates (`sweepgrok validate` exits 0): what a user starts from in
search_spaces/, and each reproduction study's grid or search file beside its committed summary in
analysis/reproduction/<name>/."""

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sweepgrok.cli import app

ROOT = Path(__file__).parents[2]
USER_FILES = sorted((ROOT / "search_spaces").glob("*/*.yaml"))
STUDY_FILES = sorted((ROOT / "analysis" / "reproduction").glob("*/*.yaml"))
FILES = USER_FILES + STUDY_FILES


def test_there_are_files():
    assert len(USER_FILES) >= 5 and len(STUDY_FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_validates(path):
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.output


def test_study_sweep_files_sit_in_the_folder_of_their_sweep():
    # A study's summary folder is named after its sweep (a grid or search file's `name:`), and so
    # is the file; a summary may hold trial files too (a search's best trial), which have no name.
    sweep_files = [p for p in STUDY_FILES if "name" in yaml.safe_load(p.read_text())]
    misplaced = [
        str(p.relative_to(ROOT)) for p in sweep_files
        if not p.stem == p.parent.name == yaml.safe_load(p.read_text())["name"]
    ]
    assert len(sweep_files) >= 25
    assert not misplaced, f"not analysis/reproduction/<name>/<name>.yaml: {misplaced}"


def test_search_spaces_holds_no_study_files():
    # The reproduction's CPU twins and pilots live beside their summaries, not among the files a
    # user starts from.
    studies = [p.name for p in USER_FILES if p.stem.startswith("repro") or "pilot" in p.stem]
    assert not studies, f"move to analysis/reproduction/<name>/: {studies}"
