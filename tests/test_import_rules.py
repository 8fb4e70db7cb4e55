"""Which module may import what, checked on the source (ast) of every module, imports inside
functions included: Typer only in the CLI, the CLI from nowhere else, Ray only in
sweepgrok/tune/, Optuna only in the study module and the Tune search module, the tracker
libraries (optional extras) only in sweepgrok/trackers/."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    p.relative_to(ROOT).as_posix()
    for folder in ("sweepgrok", "analysis", "benchmarks")
    for p in (ROOT / folder).rglob("*.py")
)
OPTUNA_MODULES = {"sweepgrok/search/study.py", "sweepgrok/tune/search.py"}
EXTRAS = ("mlflow", "wandb")
"""Optional extras: a base install has neither, so nothing outside sweepgrok/trackers/ may
import them."""
ENTRY = "sweepgrok/__main__.py"
"""`python -m sweepgrok`: runs the CLI, so it imports it (and nothing else)."""


def imported(source: str) -> Iterator[str]:
    """Every module name the source imports (import, from-import, importlib.import_module)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield str(node.args[0].value)


def imports(path: str, package: str) -> bool:
    names = imported((ROOT / path).read_text())
    return any(name == package or name.startswith(f"{package}.") for name in names)


def broken_rules(path: str) -> list[str]:
    """The import rules `path` (relative to the repository root) breaks."""
    in_cli = path.startswith("sweepgrok/cli/")
    in_trackers = path.startswith("sweepgrok/trackers/")
    rules = [
        ("typer", not in_cli, "typer outside sweepgrok/cli/"),
        ("sweepgrok.cli", not in_cli and path != ENTRY, "the CLI from the library or analysis/"),
        ("ray", not path.startswith("sweepgrok/tune/"), "ray outside sweepgrok/tune/"),
        ("optuna", path not in OPTUNA_MODULES, "optuna outside study.py and tune/search.py"),
        *((extra, not in_trackers, f"{extra} outside sweepgrok/trackers/") for extra in EXTRAS),
    ]
    return [why for package, banned, why in rules if banned and imports(path, package)]


def test_every_package_is_seen() -> None:
    assert {"sweepgrok/cli/__init__.py", "sweepgrok/search/study.py", "analysis/report.py"} <= set(
        MODULES
    )
    assert imports("sweepgrok/tune/search.py", "optuna")  # lazily, inside functions
    assert imports("sweepgrok/cli/search.py", "sweepgrok.tune")
    assert imports("sweepgrok/trackers/mlflow.py", "mlflow")  # and not mistaken for its own name
    assert imports("sweepgrok/trackers/wandb.py", "wandb")
    assert not imports("sweepgrok/tune/callback.py", "mlflow")


@pytest.mark.parametrize("path", MODULES)
def test_module_keeps_the_import_rules(path: str) -> None:
    assert broken_rules(path) == []


def test_the_checker_sees_nested_and_dynamic_imports() -> None:
    source = (
        "import importlib\n"
        "def f():\n"
        "    from ray import tune\n"
        "    importlib.import_module('optuna.samplers')\n"
        "    from sweepgrok.cli.common import fail\n"
    )
    assert set(imported(source)) >= {"ray", "optuna.samplers", "sweepgrok.cli.common"}
    assert "typer" in imported("import typer as t")


def test_the_cli_loads_no_heavy_package_before_a_command_runs() -> None:
    code = (
        "import sys, sweepgrok.cli; "
        "heavy = ('ray', 'torch', 'optuna', 'matplotlib', 'pandas', 'mlflow', 'wandb'); "
        "bad = [m for m in heavy if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
