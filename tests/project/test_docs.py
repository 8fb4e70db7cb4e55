"""README.md and docs/*.md: links and named paths exist, YAML examples validate."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"`((?:sweepgrok|tests|benchmarks|search_spaces|analysis|docs)/[\w./*-]*)`")
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)
NAMED = re.compile(r"^# ([\w-]+\.yaml)\b")


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def test_there_are_pages_to_check():
    assert (ROOT / "docs" / "config.md") in PAGES and len(PAGES) > 2


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_relative_links_point_to_existing_files(page):
    missing = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        if not (page.parent / target.split("#")[0]).exists():
            missing.append(target)
    assert not missing, f"{page.name}: links to missing files {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_repository_paths_in_backticks_exist(page):
    missing = [p for p in CODE_PATH.findall(page.read_text()) if not list(ROOT.glob(p))]
    assert not missing, f"{page.name}: names files that are not in the repository {missing}"


def _yaml_examples() -> list[tuple[Path, int, str]]:
    return [
        (page, i, block)
        for page in PAGES
        for i, block in enumerate(YAML_BLOCK.findall(page.read_text()))
    ]


EXAMPLES = _yaml_examples()


def test_the_readme_tour_has_yaml_examples():
    assert sum(page.name == "README.md" for page, _, _ in EXAMPLES) >= 3


@pytest.mark.parametrize(
    ("page", "index", "block"), EXAMPLES, ids=[f"{p.name}-{i}" for p, i, _ in EXAMPLES]
)
def test_yaml_examples_validate(page, index, block, tmp_path):
    # Beside copies of search_spaces/ and of the page's other examples (by their "# NAME.yaml"
    # first line), so that `base: trial_quick.yaml` or `base: trial.yaml` resolves.
    for spec in (ROOT / "search_spaces").glob("*/*.yaml"):
        shutil.copy(spec, tmp_path / spec.name)
    for other_page, _, other in EXAMPLES:
        named = NAMED.match(other)
        if other_page == page and named:
            (tmp_path / named.group(1)).write_text(other)
    named = NAMED.match(block)
    path = tmp_path / (named.group(1) if named else f"example_{index}.yaml")
    path.write_text(block)
    result = subprocess.run(
        [sys.executable, "-m", "sweepgrok", "validate", str(path)],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, f"{page.name} YAML example {index}: {result.stderr}"
