"""Tests this Python cannot run for want of a module: ``python -m benchmarks.unrunnable tests``.

A machine lent for a GPU check has the runtime packages (carried there) but not every test-only
one (duckdb, mlflow, wandb, optuna-dashboard): a file that imports one at its top fails to
collect, a test that imports one fails. Prints, one a line, the pytest options that leave them
out (``--ignore=FILE``, ``--deselect=FILE::TEST``), and on stderr what each needs, so that the
check's report says "not run, needs duckdb" instead of counting an import error as a failure.
Imports are read from the source (ast), not executed; a test whose missing import sits in a
helper it calls is not found (it then fails, naming the module).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from functools import cache
from pathlib import Path


@cache
def local_modules(folder: Path) -> frozenset[str]:
    """Modules of the tests' own folder and its subfolders (conftest and helpers, which pytest
    or the tests themselves put on sys.path)."""
    return frozenset({p.stem for p in folder.rglob("*.py")}
                     | {p.parent.name for p in folder.rglob("__init__.py")})


@cache
def missing(module: str, folder: Path) -> bool:
    """Whether the top-level package of `module` can be found neither here nor among the
    modules of the tests' `folder`."""
    top = module.split(".")[0]
    if top in local_modules(folder):
        return False
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


def imported(node: ast.AST) -> set[str]:
    """Absolute modules imported anywhere inside `node`."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out.add(n.module)
    return out


def used_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function refers to: its arguments (pytest fixtures) and the names in its body."""
    args = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    return args | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}


def plan(path: Path, root: Path) -> tuple[list[str], list[str]]:
    """(pytest options, notes) leaving out what of test file `path`, under the tests' folder
    `root`, cannot run here.

    A test needs what it imports, and what the module's functions it names (helpers it calls,
    fixtures it takes) need, transitively. Modules are looked for under `root`, not only beside
    `path`: the tests import the root's conftest and helpers (pyproject puts tests/ on the path)."""
    tree = ast.parse(path.read_text())
    top = {m for stmt in tree.body if isinstance(stmt, ast.Import | ast.ImportFrom)
           for m in imported(stmt) if missing(m, root)}
    if top:
        return [f"--ignore={path}"], [f"not run: {path} (needs {', '.join(sorted(top))})"]
    fns = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    need = {name: {m for m in imported(f) if missing(m, root)} for name, f in fns.items()}
    changed = True
    while changed:  # what a function's callees (and fixtures) need, to a fixpoint
        changed = False
        for name, f in fns.items():
            extra = set().union(*(need[u] for u in used_names(f) & fns.keys() if u != name))
            if not extra <= need[name]:
                need[name] |= extra
                changed = True
    options, notes = [], []
    for name in fns:
        if name.startswith("test") and need[name]:
            options.append(f"--deselect={path}::{name}")
            notes.append(f"not run: {path}::{name} (needs {', '.join(sorted(need[name]))})")
    return options, notes


def main(argv: list[str] | None = None) -> None:
    folders = [Path(a) for a in (argv if argv is not None else sys.argv[1:])] or [Path("tests")]
    for folder in folders:
        # Every folder below too: the tests live in tests/<folder>/, mirroring the code.
        for path in sorted(folder.rglob("test_*.py")):
            options, notes = plan(path, folder)
            for line in options:
                print(line)
            for line in notes:
                print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
