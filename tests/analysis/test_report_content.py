"""The result line (sweepgrok.analysis.report_content) on a real sweep: one run of `make demo`
kept in tests/data/quickstart_demo (the numbers the README quotes: 9.33x and 6.79x, exact p 0.33).
`sweepgrok analyze` and `sweepgrok report` (Markdown and HTML) state each arm's speed-up, its CI,
n per arm and p as the table gives them, Holm's p labelled as such.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "quickstart_demo"
BASELINE = "model.norm=none,model.attention=softmax"
BASE = "norm=none, attention=softmax, wd=1"
SPHERE = "norm=sphere, attention=softmax, wd=0"
UNIFORM = "norm=none, attention=uniform, wd=1"


def sweepgrok(*args: str) -> str:
    """stdout of the command as a user types it (exit 0)."""
    # An environment without COLUMNS, given explicitly: a library in the test process may have
    # set COLUMNS at the C level, where the child would inherit it (lines would then be wrapped).
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "sweepgrok", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def result_of(printed: str) -> str:
    (line,) = [x for x in printed.splitlines() if x.startswith("Result: ")]
    return line.removeprefix("Result: ")


def test_analyze_states_each_arms_speed_up_ci_n_and_the_tables_p() -> None:
    # The default grouping (norm, attention, wd: the keys that vary) with the obvious baseline:
    # wd is zipped with norm, so it goes with the arms and the sphere arm has its baseline.
    line = result_of(sweepgrok("analyze", str(DEMO), "--baseline", BASELINE))
    assert f"{SPHERE} groks 9.33x sooner than {BASE} [95% CI 7.86, 11.40] (n = 2 per arm, " \
           "p = 0.33, p Holm = 0.67: not significant at 0.05)" in line
    assert f"{UNIFORM} groks 6.79x sooner than {BASE} [95% CI 5.79, 8.14] (n = 2 per arm, " \
           "p = 0.33, p Holm = 0.67: not significant at 0.05)" in line
    assert "p Holm: Holm-adjusted over 2 comparisons" in line
    # The same numbers as the table, read from its json.
    rows = json.loads(sweepgrok("analyze", str(DEMO), "--baseline", BASELINE, "--format", "json"))
    for row in (r for r in rows if not r["is_baseline"]):
        assert row["baseline_group"] == BASE  # no arm is left without its baseline
        ci = f"[95% CI {row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}]"
        said = f"{row['label']} groks {row['speedup']:.2f}x sooner than {BASE} {ci} " \
               f"(n = {row['n']} per arm, p = {row['p']:.2g}, p Holm = {row['p_holm']:.2g}:"
        assert said in line


def test_analyze_says_which_keys_group_and_which_go_with_the_arms() -> None:
    printed = sweepgrok("analyze", str(DEMO), "--baseline", BASELINE, "--format", "markdown")
    assert "Grouped by the keys that vary across runs: `model.norm`, `model.attention`, " \
           "`optim.weight_decay`. Each group is compared with the one baseline group; " \
           "`optim.weight_decay` changes with the baseline's keys: a setting of the arms, " \
           "not a stratum." in printed
    assert "no baseline in this stratum" not in printed
    assert f"**Result**: {UNIFORM} groks 6.79x sooner" in printed


def test_analyze_without_a_baseline_orders_the_arms_by_km_median() -> None:
    line = result_of(sweepgrok("analyze", str(DEMO)))
    assert line == (
        f"fastest: {SPHERE} (KM median 600, n = 2), then {UNIFORM} (KM median 825, n = 2), "
        f"then {BASE} (KM median 5,600, n = 2); not compared (no --baseline). "
        "Grok = test accuracy >= 0.99."
    )


def test_the_report_states_the_same_result_in_markdown_and_html(tmp_path: Path) -> None:
    out = tmp_path / "report"
    sweepgrok("report", str(DEMO), "--out", str(out), "--baseline", BASELINE, "--html")
    printed = result_of(sweepgrok("analyze", str(DEMO), "--baseline", BASELINE))
    markdown = (out / "report.md").read_text()
    assert markdown.splitlines()[2] == f"**Result**: {printed}"
    assert f"{SPHERE} groks 9.33x sooner than {BASE} [95% CI 7.86, 11.40]" in printed
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"<strong>Result</strong>: {html.escape(printed)}</p>" in page
