"""`sweepgrok report --html`: one self-contained page, opened in headless Chromium.

The browser tests need Debian's chromium (`make test` installs it when it runs as root); without
it they skip, saying so. The page is built once from a small sweep whose name holds HTML
(`<b>&"`), so that escaping is checked wherever the name appears.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import GROKS, write_sweep
from typer.testing import CliRunner

from sweepgrok.analysis import definitions
from sweepgrok.analysis.report_content import caption, result_line
from sweepgrok.cli import app

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SWEEP_NAME = 'quick<b>&"'
FIGURES = {"accuracy", "grok_times", "survival", "deff", "progress"}
PROBE = """<pre id="probe"></pre><script>
window.addEventListener("load", () => {
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const images = [...document.images].map((i) => [i.alt, i.complete, i.naturalWidth,
    i.naturalHeight, i.getBoundingClientRect().width]);
  const tables = [...document.querySelectorAll("table")].map((t) => [t.rows.length,
    t.getBoundingClientRect().width, t.getBoundingClientRect().height]);
  document.getElementById("probe").textContent = JSON.stringify({images, tables});
});
</script>"""
"""Goes into the test's copy of the page only (the report itself holds no script): after the
load event, every figure's decoded size and every table's drawn size, details opened."""


class _Resources(HTMLParser):
    """Every src and href of a page, and its tags."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "poster")]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    sweep = write_sweep(root / SWEEP_NAME, GROKS)
    out = root / "report"
    args = ["report", str(sweep), "--out", str(out), "--baseline", "model.norm=none", "--html"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    written = [f"wrote {out / name}" for name in ("report.md", "report.html")]
    assert result.stdout.splitlines() == written
    return out / "report.html"


def test_the_page_references_nothing_outside_itself(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    page = _Resources()
    page.feed(text)
    assert sorted(link.split(";")[0] for link in page.links if link.startswith("data:")) == [
        "data:image/png"
    ] * len(FIGURES)
    assert all(link.startswith(("data:image/", "#")) for link in page.links), page.links
    assert not {"script", "link", "iframe", "object", "embed"} & set(page.tags)
    assert "http://" not in text and "https://" not in text and "@import" not in text
    assert "url(" not in text


def test_no_path_of_the_machine_appears(report: Path) -> None:
    text = re.sub(r"data:[^\"]+", "", report.read_text(encoding="utf-8"))  # base64 holds "/"
    for folder in (report.parent.parent, Path.cwd(), Path.home()):
        assert str(folder) + "/" not in text
    assert not re.search(r"(?<![\w.])/(tmp|home|root|Users|work|var|private)/", text)
    command = shlex.join(["sweepgrok", "report", SWEEP_NAME, "--out", "report"])
    assert html.escape(command) in text  # folders by their names


def test_user_text_is_escaped(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "<b>" not in text and SWEEP_NAME not in text
    assert "<code>quick&lt;b&gt;&amp;&quot;</code>" in text  # the sweep's name
    assert "<td>quick&lt;b&gt;&amp;&quot;-sphere-2</td>" in text  # a run in the config tables


def test_the_page_holds_tables_definitions_configs_and_provenance(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    for heading in ("Grokking at test accuracy &gt;= 0.95", "Grokking at test accuracy &gt;= 0.99"):
        assert f"<h2>{heading}</h2>" in text
    assert '<td>sphere</td><td>3/3 100% <span class="nw">[44%, 100%]</span></td>' in text
    for term, _ in definitions.DEFINITIONS:
        assert f"<dt>{html.escape(term)}</dt>" in text
    assert "<dd>first evaluation where train accuracy ≥ <code>train.fit_threshold</code>" in text
    # The config: keys every run shares once, the seed per run in its group's table.
    assert "<td>model.d_model</td><td>128</td>" in text
    assert text.count("<details>") == 3 and "<th>train.seed</th>" in text
    for what in ("sweepgrok version", "git commit", "command", "made", "sweeps"):
        assert f"<td>{what}</td>" in text
    # report.md shows the same definitions.
    assert definitions.markdown() in (report.parent / "report.md").read_text()


def _chromium(tmp_path: Path, *args: str) -> str:
    if not CHROMIUM.exists():
        pytest.skip(
            f"no {CHROMIUM}: the HTML report is checked in Debian's chromium, which `make test` "
            "installs when run as root (apt-get install chromium)"
        )
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    result = subprocess.run(
        [str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=100
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_every_figure_and_table_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    page = tmp_path / "probe.html"
    text = report.read_text(encoding="utf-8")
    page.write_text(text.replace("</body>", PROBE + "\n</body>"), encoding="utf-8")
    dom = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), dom[-2000:]
    probe = json.loads(html.unescape(found.group(1)))
    # Each image's alt text is its caption (what it shows), never its file name.
    shown = {caption(Path(f"{f}.png"), 0.99) for f in FIGURES}
    assert {alt for alt, *_ in probe["images"]} == shown
    for alt, complete, width, height, drawn in probe["images"]:
        assert complete and width > 100 and height > 100 and drawn > 100, alt  # decoded, shown
    # Two analysis tables, the shared config, one per group, the provenance: each drawn.
    assert len(probe["tables"]) == text.count("<table>") == 6
    rows = [n for n, _, _ in probe["tables"]]
    assert rows[:2] == [3, 3] and rows[-1] == 5  # header + 2 groups; 5 provenance rows
    assert all(w > 0 and h > 0 for _, w, h in probe["tables"]), probe["tables"]


WIDTHS = """<pre id="probe"></pre><script>
window.addEventListener("load", () => {
  const boxes = [...document.querySelectorAll(".scroll")].map((d) => [d.scrollWidth,
    d.clientWidth, d.getBoundingClientRect().right]);
  document.getElementById("probe").textContent = JSON.stringify({boxes});
});
</script>"""
"""The test's copy of the page: each table's box, the width its table needs and the width it has."""


def test_the_widest_tables_fit_a_1280_pixel_window(tmp_path: Path) -> None:
    # Two keys, strata-free comparisons with Holm and paired speed-ups: the widest analysis
    # table there is (12 columns); before, speed-up and p sat behind a scrollbar at 1280 px.
    out = tmp_path / "wide"
    args = ["report", str(ROOT / "tests" / "data" / "quickstart_demo"), "--out", str(out),
            "--by", "model.norm,model.attention", "--paired", "--html",
            "--baseline", "model.norm=none,model.attention=softmax"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    page = tmp_path / "widths.html"
    text = (out / "report.html").read_text(encoding="utf-8")
    assert text.count("<th>paired speed-up [CI]</th>") == 2  # the 12-column tables are there
    page.write_text(text.replace("</body>", WIDTHS + "\n</body>"), encoding="utf-8")
    dom = _chromium(tmp_path, "--window-size=1280,2000", "--virtual-time-budget=10000",
                    "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), dom[-2000:]
    boxes = json.loads(html.unescape(found.group(1)))["boxes"]
    assert len(boxes) == text.count('<div class="scroll">')
    for needed, shown, right in boxes:
        assert needed <= shown and right <= 1280, boxes  # nothing behind a scrollbar


def test_a_screenshot_of_the_page_is_not_blank(report: Path, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape == (2000, 1280, 3)
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) > 50  # text, tables and figures, not one colour
    dark = (pixels.sum(axis=2) < 200).mean()
    assert 0.001 < dark < 0.5  # some text and lines drawn on a light page


def test_the_definitions_are_the_list_in_the_docs() -> None:
    """docs/statistics.md shows the definitions the reports print (whitespace aside)."""
    docs = (ROOT / "docs" / "statistics.md").read_text()
    found = re.search(r"<!-- definitions:.*?-->\n(.*?)\n<!-- end of definitions -->", docs, re.S)
    assert found, "docs/statistics.md lost its definitions markers"

    def words(text: str) -> str:
        return " ".join(text.split())

    assert words(found.group(1)) == words(definitions.markdown()), (
        "docs/statistics.md and sweepgrok/analysis/definitions.py differ: change one, "
        "copy it to the other"
    )


def test_without_chromium_the_browser_tests_skip_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(pytest.skip.Exception, match="make test"):
        _chromium(tmp_path, "--version")



def test_the_result_line_opens_both_reports(report: Path) -> None:
    # sphere (200, 300, 300) against none (800, 900, censored at 1000): KM medians 900 and 300,
    # completely separated, but with 3 runs per arm the exact log-rank p is 2/20 = 0.1.
    groups = pd.read_csv(report.parent / "groups_99.csv").set_index("model.norm")
    lo, hi = groups.loc["sphere", ["speedup_lo", "speedup_hi"]]
    line = (f"norm=sphere groks 3.00x sooner than norm=none [95% CI {lo:.2f}, {hi:.2f}] "
            "(n = 3 per arm, p = 0.1: not significant at 0.05). Grok = test accuracy >= 0.99; "
            "speed-up = ratio of Kaplan-Meier medians; p: two-sided log-rank test by "
            "permutation.")
    text = report.read_text(encoding="utf-8")
    assert f'<p class="result"><strong>Result</strong>: {html.escape(line)}</p>' in text
    assert text.index('class="result"') < text.index("<h2>")
    assert (report.parent / "report.md").read_text().splitlines()[2] == f"**Result**: {line}"


def comparison_table(speedup: float, p: float, n: tuple[int, int] = (8, 8)) -> pd.DataFrame:
    return pd.DataFrame({
        "label": ["LayerNorm", "sphere"], "baseline_group": ["LayerNorm", "LayerNorm"],
        "is_baseline": [True, False], "n": list(n), "speedup": [1.0, speedup],
        "speedup_lo": [np.nan, speedup * 0.8], "speedup_hi": [np.nan, speedup * 1.25],
        "speedup_bound": [1.0, speedup], "p": [np.nan, p], "p_holm": [np.nan, p],
    })


@pytest.mark.parametrize(
    ("speedup", "p", "n", "said"),
    [
        (8.8, 0.002, (8, 8), "sphere groks 8.80x sooner than LayerNorm [95% CI 7.04, 11.00] "
                             "(n = 8 per arm, p = 0.002: significant at 0.05)"),
        (0.5, 0.01, (8, 6), "sphere groks 2.00x later than LayerNorm (speed-up 0.50 [95% CI "
                            "0.40, 0.62]) (n = 8 and 6, p = 0.01: significant at 0.05)"),
        (8.8, 0.33, (2, 2), "sphere groks 8.80x sooner than LayerNorm [95% CI 7.04, 11.00] "
                            "(n = 2 per arm, p = 0.33: not significant at 0.05)"),
        (float("inf"), 0.001, (8, 8), "sphere groks more than inf"),
        (float("nan"), 0.9, (8, 8), "sphere vs LayerNorm: no speed-up (neither has a KM median) "
                                    "(n = 8 per arm, p = 0.9: not significant at 0.05)"),
    ],
)
def test_the_result_line_states_the_effect_n_and_p(
    speedup: float, p: float, n: tuple[int, int], said: str
) -> None:
    table = comparison_table(speedup, p, (n[1], n[0]))  # n: (group, baseline)
    if speedup == float("inf"):  # the baseline has no median: the bound is what is known
        table.loc[1, "speedup_bound"] = 4.0
        said = ("sphere groks more than 4.00x sooner than LayerNorm (no KM median) "
                "(n = 8 per arm, p = 0.001: significant at 0.05)")
    assert result_line(table, 0.99) == (
        f"{said}. Grok = test accuracy >= 0.99; speed-up = ratio of Kaplan-Meier medians; "
        "p: two-sided log-rank test by permutation."
    )


def test_without_a_baseline_the_result_line_orders_the_groups_by_km_median() -> None:
    table = pd.DataFrame({"label": ["a", "b", "c"], "n": [3, 2, 3],
                          "km_median": [900.0, np.nan, 300.0], "steps_run_max": [1000, 4000, 400]})
    assert result_line(table, 0.95) == (
        "fastest: c (KM median 300, n = 3), then a (KM median 900, n = 3), then b (KM median "
        "> 4,000, n = 2); not compared (no --baseline). Grok = test accuracy >= 0.95."
    )


def test_figures_have_captions_that_say_what_they_show(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", text)
    assert len(captions) == len(FIGURES)
    assert html.escape(caption(Path("survival.png"), 0.99)) in captions
    assert sorted(captions) == sorted(html.escape(caption(Path(f"{f}.png"), 0.99))
                                      for f in FIGURES)  # what they show, not file names
    md = (report.parent / "report.md").read_text()
    assert f"*{caption(Path('accuracy.png'), 0.99)}*" in md


def test_the_tables_definitions_are_given_once(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert text.count('class="legend"') == 1
    assert text.count("Median/mean among grokked runs") == 1
    assert "test_acc &gt;= the table&#x27;s threshold" in text  # each heading names its own
    md = (report.parent / "report.md").read_text()
    assert md.count("Median/mean among grokked runs") == 1


def test_report_md_has_the_sections_of_the_html(report: Path) -> None:
    md = (report.parent / "report.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings[-3:] == ["## Definitions", "## Config of every run", "## Provenance"]
    assert "| model.d_model | 128 |" in md and "| train.seed |" in md
    for what in ("sweepgrok version", "git commit", "command", "made", "sweeps"):
        assert f"| {what} | " in md
