"""Which module may import what, checked on the source (ast) of every module, imports inside
functions included: the layers of docs/architecture.md (a folder of sweepgrok imports only its
own folder and the folders below it; no module imports itself back through others), Typer only
in the CLI, the CLI from nowhere else, Ray only in sweepgrok/tune/, Optuna only in the study
module and the Tune search module, the tracker libraries (optional extras) only in
sweepgrok/trackers/."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(
    p.relative_to(ROOT).as_posix()
    for folder in ("sweepgrok", "analysis", "benchmarks")
    for p in (ROOT / folder).rglob("*.py")
)
OPTUNA_MODULES = {"sweepgrok/search/study.py", "sweepgrok/tune/search.py"}
EXTRAS = ("mlflow", "wandb")
"""Optional extras: a base install has neither, so nothing outside sweepgrok/trackers/ may
import them."""
LAYERS = ("core", "config", "store", "train", "search", "analysis", "trackers", "tune", "api",
          "cli")
"""The folders of sweepgrok, bottom first: each may import its own folder and those before it."""
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


def layer(path: str) -> str | None:
    """The folder of sweepgrok that `path` lies in (None: outside them)."""
    parts = path.split("/")
    return parts[1] if parts[0] == "sweepgrok" and len(parts) > 2 else None


def sweepgrok_imports(path: str) -> set[str]:
    """The modules of sweepgrok (as paths) that `path` imports."""
    out = set()
    for name in imported((ROOT / path).read_text()):
        parts = name.split(".")
        for end in range(len(parts), 1, -1):  # the longest prefix that is a module
            stem = "/".join(parts[:end])
            found = [f"{stem}.py", f"{stem}/__init__.py"]
            hit = next((f for f in found if f in MODULES), None)
            if hit and parts[0] == "sweepgrok":
                out.add(hit)
                break
    return out - {path}


def layers_broken(path: str) -> list[str]:
    """The imports of `path` that run up the layers."""
    own = layer(path)
    if own is None:
        return []
    return sorted(
        f"{path} imports {other} ({layer(other)} is above {own})"
        for other in sweepgrok_imports(path)
        if layer(other) is not None and LAYERS.index(str(layer(other))) > LAYERS.index(own)
    )


def test_every_package_is_seen() -> None:
    assert {"sweepgrok/cli/__init__.py", "sweepgrok/search/study.py", "analysis/claims.py"} <= set(
        MODULES
    )
    folders = {p.split("/")[1] for p in MODULES if p.startswith("sweepgrok/") and p.count("/") > 1}
    assert folders == set(LAYERS)
    assert imports("sweepgrok/tune/search.py", "optuna")  # lazily, inside functions
    assert imports("sweepgrok/api/running.py", "sweepgrok.tune")
    assert imports("sweepgrok/trackers/mlflow.py", "mlflow")  # and not mistaken for its own name
    assert imports("sweepgrok/trackers/wandb.py", "wandb")
    assert not imports("sweepgrok/tune/callback.py", "mlflow")


@pytest.mark.parametrize("path", MODULES)
def test_module_keeps_the_import_rules(path: str) -> None:
    assert broken_rules(path) == []


@pytest.mark.parametrize("path", [p for p in MODULES if layer(p)])
def test_module_imports_only_its_layer_and_below(path: str) -> None:
    assert layers_broken(path) == []


def test_no_module_imports_itself_back() -> None:
    graph = {path: sweepgrok_imports(path) for path in MODULES if path.startswith("sweepgrok/")}
    done: set[str] = set()

    def visit(path: str, trail: list[str]) -> None:
        assert path not in trail, "import circle: " + " -> ".join([*trail, path])
        if path in done:
            return
        for other in sorted(graph.get(path, ())):
            visit(other, [*trail, path])
        done.add(path)

    for path in sorted(graph):
        visit(path, [])


def test_the_layer_checker_sees_an_import_up_and_a_circle() -> None:
    assert sweepgrok_imports("sweepgrok/cli/search.py") >= {"sweepgrok/search/study.py"}
    assert layer("sweepgrok/store/sink.py") == "store" and layer("sweepgrok/__main__.py") is None
    assert "sweepgrok/analysis/plots.py" in sweepgrok_imports("sweepgrok/cli/search.py")


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
