"""Every YAML in search_spaces/ validates (`sweepgrok validate` exits 0)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweepgrok.cli import app

FILES = sorted((Path(__file__).parents[2] / "search_spaces").glob("*/*.yaml"))


def test_there_are_files():
    assert len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_validates(path):
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.output
