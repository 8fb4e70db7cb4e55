"""README.md and docs/*.md: links and named paths exist, YAML examples validate."""

import os
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


DEMO = ROOT / "tests" / "data" / "quickstart_demo"
"""One run of `make demo` (runs/ and metrics/ only): what the README's demo tables quote."""
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def _readme_block(marker: str) -> list[str]:
    """The lines of the README's plain (no language) code block holding `marker`."""
    fenced = FENCE.findall((ROOT / "README.md").read_text())
    blocks = [body for lang, body in fenced if not lang and marker in body]
    assert len(blocks) == 1, f"README.md: expected one code block with {marker!r}"
    return [line for line in blocks[0].splitlines() if line.strip()]


def _cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_the_readme_demo_analysis_is_what_analyze_prints_on_the_demo_sweep():
    # The Makefile's analyze command at 120 columns, as a user's terminal prints it.
    args = ["--by", "model.norm,model.attention",
            "--baseline", "model.norm=none,model.attention=softmax"]
    result = subprocess.run(
        [sys.executable, "-m", "sweepgrok", "analyze", str(DEMO), *args],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stderr
    quoted = _readme_block("speed-up")
    assert result.stdout.splitlines()[:len(quoted)] == quoted
    assert len(quoted) == 2 + 3  # headers, rule, the 3 variants


def test_the_readme_demo_runs_are_the_demo_sweeps_runs():
    from sweepgrok.store.sink import read_runs

    runs = read_runs(DEMO).set_index("run_id")
    quoted = _readme_block("fit_step   grok_step")
    rows = [_cells(line) for line in quoted if re.match(r"\s*\w{5}_\d{5}\s", line)]
    assert len(rows) == len(runs) == 6
    for run_id, norm, attention, wd, seed, status, fit, grok in rows:
        run = runs.loc[f"quickstart-{run_id}"]
        assert [run["model.norm"], run["model.attention"], run["status"]] == [
            norm, attention, status]
        assert (run["optim.weight_decay"], run["train.seed"]) == (float(wd), int(seed))
        assert (run["fit_step"], run["grok_step"]) == (int(fit), int(grok))


TOUR_CLAIM = re.compile(r"It fits at step (\d+), groks at step (\d+) \(")


def test_the_readme_tour_states_fit_and_grok_steps():
    assert TOUR_CLAIM.search((ROOT / "README.md").read_text()), "README.md: the tour's claim"


# 38 s on 2 shared cores with one torch thread (11 minutes with two threads fighting for them).
@pytest.mark.timeout(900)
def test_the_readme_tour_trial_fits_and_groks_where_the_readme_says(tmp_path):
    """Exactly, with torch's CPU numerics pinned as the golden tests pin them (golden.ENV: one
    thread, AVX2 kernels; the same bits across x86 CPUs). Unpinned, another machine's sums run
    in another order and its grok step may be an evaluation or two off (the README says so)."""
    import pandas as pd
    from golden import ENV

    readme = (ROOT / "README.md").read_text()
    (trial,) = [b for b in YAML_BLOCK.findall(readme) if b.startswith("# trial.yaml")]
    (tmp_path / "trial.yaml").write_text(trial)
    proc = subprocess.run(  # as the tour types it, from the folder holding trial.yaml
        [sys.executable, "-m", "sweepgrok", "train", "trial.yaml", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, env={**os.environ, **ENV},
    )
    assert proc.returncode == 0, proc.stderr
    run = pd.read_parquet(tmp_path / "runs" / "trial" / "runs").iloc[0]
    fit, grok = (int(x) for x in TOUR_CLAIM.search(readme).groups())
    assert run["status"] == "grokked" and run["steps_run"] == run["grok_step"]
    assert (run["fit_step"], run["grok_step"]) == (fit, grok), (
        f"README.md says fit {fit}, grok {grok}; this run: {run['fit_step']}, {run['grok_step']}"
    )
