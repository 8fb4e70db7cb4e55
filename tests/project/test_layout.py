"""The tests mirror the package: every module of sweepgrok/<folder>/ has its test file
tests/<folder>/test_<module>.py, or docs/architecture.md names the tests that cover it; every
command has tests/cli/test_<command>.py; docs/architecture.md names every helper module beside
conftest; no two modules share a name outside cli/ (named after commands) and tune/ (names
pickled in sweeps)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(
    p.relative_to(ROOT)
    for p in (ROOT / "sweepgrok").glob("*/*.py")
    if p.name != "__init__.py"
)


def test_every_module_has_its_tests() -> None:
    covered = (ROOT / "docs" / "architecture.md").read_text()
    missing = [
        str(module)
        for module in MODULES
        if not (ROOT / "tests" / module.parent.name / f"test_{module.name}").exists()
        and f"`{module.as_posix()}`" not in covered
        and f"`{module.parent.as_posix()}/`" not in covered.split("Modules covered by")[-1]
    ]
    assert missing == [], "no tests/<folder>/test_<module>.py and not in docs/architecture.md"


def test_module_names_are_unique() -> None:
    names = Counter(
        module.name for module in MODULES if module.parent.name not in ("cli", "tune")
    )
    assert [name for name, n in names.items() if n > 1] == []


def test_every_test_file_name_is_unique() -> None:
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []


COMMANDS_TESTED_ELSEWHERE = {"confirm"}
"""tests/search/test_confirm.py and tests/e2e/test_confirm_e2e.py (docs/architecture.md): a
tests/cli/test_confirm.py would share the first one's file name."""


def test_every_command_has_its_test_file() -> None:
    from sweepgrok.cli import app

    commands = {c.callback.__name__ for c in app.registered_commands if c.callback}
    missing = {c for c in commands if not (ROOT / "tests" / "cli" / f"test_{c}.py").exists()}
    assert missing == COMMANDS_TESTED_ELSEWHERE


def test_every_helper_module_is_named_in_architecture() -> None:
    tests_section = (ROOT / "docs" / "architecture.md").read_text().split("## Tests")[-1]
    helpers = sorted(p.name for p in (ROOT / "tests").glob("*.py") if p.name != "conftest.py")
    assert helpers and [h for h in helpers if f"`tests/{h}`" not in tests_section] == []
