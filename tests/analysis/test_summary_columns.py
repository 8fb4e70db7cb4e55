"""The group summary's columns are declared once (sweepgrok.analysis.summary_columns): the
statistics' columns, the tables' headers and cells, the status table, the reports' definitions
and the generated section of docs/statistics.md come from the declaration, and the committed
section is current. A new statistic is one entry plus its computation."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweepgrok.analysis import definitions, stats, summary_columns, tables
from sweepgrok.analysis.summary_columns import (
    COLLAPSE,
    NAMES,
    NARROW,
    REGENERATE,
    SHOWN_IN,
    STATUS,
    SUMMARY_COLUMNS,
    TABLE,
    SummaryColumn,
    section,
    shown_in,
)
from sweepgrok.analysis.sweepstatus import group_rows, status_name

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "statistics.md"


def run_summary_rows(with_status: bool = True) -> pd.DataFrame:
    """A run summary as stats.run_summary gives it: two groups, one with a censored run."""
    rows = pd.DataFrame({
        "run_id": ["a", "b", "c", "d", "e"],
        "model.norm": ["none", "none", "none", "sphere", "sphere"],
        "steps_run": [800, 600, 1000, 300, 400],
        "grok_step_99": [800.0, 600.0, np.nan, 300.0, 400.0],
        "delay_99": [500.0, 400.0, np.nan, 200.0, 250.0],
        "collapse_step": [300.0, np.nan, 500.0, 100.0, 150.0],
        "collapse_to_grok_99": [500.0, np.nan, np.nan, 200.0, 250.0],
        "train.max_steps": [1000, 1000, 1000, 1000, 1000],
    })
    if with_status:
        rows["status"] = ["grokked", "grokked", "censored", "grokked", "grokked"]
    return rows


def test_committed_section_is_current() -> None:
    text = DOC.read_text()
    start, end = text.index(summary_columns.START), text.index(summary_columns.END)
    committed = text[start:end + len(summary_columns.END)]
    assert committed == section(), (
        f"docs/statistics.md's summary columns are stale (a column or its meaning changed): "
        f"run `{REGENERATE}`"
    )


def test_module_prints_the_section_and_rewrites_only_it(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sweepgrok.analysis.summary_columns"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    assert out == section() + "\n"
    doc = tmp_path / "statistics.md"
    stale = f"{summary_columns.START} old -->\n| stale |\n{summary_columns.END}"
    doc.write_text(f"before\n{stale}\nafter\n")
    subprocess.run([sys.executable, "-m", "sweepgrok.analysis.summary_columns", str(doc)],
                   cwd=ROOT, check=True)
    assert doc.read_text() == f"before\n{section()}\nafter\n"


def test_rewrite_refuses_a_file_without_the_section() -> None:
    with pytest.raises(ValueError, match="no section between"):
        summary_columns.rewrite("# Statistics\n")


@pytest.mark.parametrize("with_status", [True, False])
def test_group_summary_columns_are_the_declared_ones_in_order(with_status: bool) -> None:
    table = stats.group_summary(run_summary_rows(with_status), ["model.norm"], n_boot=50)
    declared = [n for n in NAMES if with_status or n != "n_failed"]
    assert list(table.columns) == ["model.norm", "label", *declared]


def test_every_column_is_declared_once_with_a_unit_and_a_one_line_definition() -> None:
    assert len(set(NAMES)) == len(NAMES)
    for c in SUMMARY_COLUMNS:
        assert c.unit and c.definition.strip(), c.name
        assert "\n" not in c.definition and "|" not in c.definition, c.name
        assert c.shown <= set(SHOWN_IN), c.name
        assert bool(c.shown) == bool(c.header), c.name
        # status formats its own values (by unit); every other table by the cell.
        assert (c.cell is not None) == bool(c.shown - {STATUS}), c.name
        assert (NARROW in c.shown) == bool(c.short) and (not c.short or TABLE in c.shown), c.name


def test_the_tables_show_the_declared_headers_and_cells() -> None:
    table = stats.group_summary(run_summary_rows(), ["model.norm"], n_boot=50)
    headers, rows = tables.display_rows(table, ["model.norm"])
    assert headers == ["norm", *(c.table_header for c in shown_in(TABLE))]
    assert rows[0][1:] == [c.cell(table.iloc[0].to_dict(), 0) for c in shown_in(TABLE) if c.cell]
    narrow, _ = tables.display_rows(table, ["model.norm"], level=1)
    assert narrow == ["norm", *(c.short for c in shown_in(NARROW))]
    assert rows[0][1] == "2/3 67% [21%, 94%]"  # none: a, b grokked, c censored
    assert [c.header for c in shown_in(STATUS)] == ["runs", "grokked", "median grok", "KM median"]
    assert [c.name for c in shown_in(COLLAPSE)] == ["collapse_median", "collapse_to_grok_median"]


def test_status_groups_hold_the_columns_declared_for_status() -> None:
    groups = group_rows(run_summary_rows(), ["model.norm"], 0.99)
    names = [status_name(c.name) for c in shown_in(STATUS)]
    assert names == ["runs", "grokked", "grok_median", "km_median"]  # what `status --json` says
    assert list(groups[0]) == ["group", "label", *names]
    assert [groups[0][n] for n in names] == [3, 2, 700.0, 800.0]


def test_the_reports_define_the_declared_terms_in_order() -> None:
    terms = [term for term, _ in definitions.DEFINITIONS]
    declared = list(summary_columns.definitions())
    assert [term for term, _ in declared] == ["success rate", "median grok step and delay",
                                              "KM median"]
    at = terms.index(declared[0][0])
    assert list(definitions.DEFINITIONS[at:at + len(declared)]) == declared


def test_an_undeclared_statistic_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    computed = stats._group_stats
    monkeypatch.setattr(stats, "_group_stats",
                        lambda rows, *a: {**computed(rows, *a), "grok_p90": 1.0})
    with pytest.raises(KeyError, match="declare grok_p90 in sweepgrok/analysis/summary_columns"):
        stats.group_summary(run_summary_rows(), ["model.norm"], n_boot=50)


def test_a_new_statistic_is_one_entry_plus_its_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declare grok_p90 after km_median and compute it: the summary, the tables (wide and
    narrow), the definitions and the docs' section all gain it, nothing else is touched."""
    p90 = SummaryColumn(
        "grok_p90", "steps", "90th percentile of the grok steps of grokked runs",
        header="p90 grok", short="p90", shown=frozenset({TABLE, NARROW}), term="p90 grok step",
        cell=lambda r, _level: summary_columns.steps_text(r["grok_p90"]),
    )
    at = NAMES.index("km_median") + 1
    declared = (*SUMMARY_COLUMNS[:at], p90, *SUMMARY_COLUMNS[at:])
    monkeypatch.setattr(summary_columns, "SUMMARY_COLUMNS", declared)
    monkeypatch.setattr(summary_columns, "NAMES", tuple(c.name for c in declared))
    computed = stats._group_stats

    def with_p90(rows: pd.DataFrame, threshold: float, boot: Any) -> dict[str, Any]:
        grok = rows[f"grok_step_{stats.tag(threshold)}"].dropna()
        return {**computed(rows, threshold, boot), "grok_p90": float(np.percentile(grok, 90))}

    monkeypatch.setattr(stats, "_group_stats", with_p90)
    table = stats.group_summary(run_summary_rows(), ["model.norm"], n_boot=50)
    assert list(table.columns).index("grok_p90") == list(table.columns).index("km_median") + 1
    assert math.isclose(table.loc[0, "grok_p90"], 780.0)
    headers, rows = tables.display_rows(table, ["model.norm"])
    assert headers[headers.index("KM median") + 1] == "p90 grok" and "780" in rows[0]
    assert "p90" in tables.display_rows(table, ["model.norm"], level=1)[0]
    assert ("p90 grok step", p90.definition) in summary_columns.definitions()
    assert "| `grok_p90` | steps | `p90 grok`, `p90` (narrow) |" in section()
