"""The output columns are declared once: the schemas, the tracker keys, the progress panels and
docs/outputs.md come from the declarations, and the committed docs/outputs.md is current."""

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from sweepgrok.config.thresholds import GROK_STEP_COLUMNS
from sweepgrok.store.columns import (
    FOLDERS,
    GEOMETRY_COLUMNS,
    METRICS_COLUMNS,
    REGENERATE,
    RUNS_COLUMNS,
    STATUS_MEANINGS,
    folder_section,
    progress_panels,
    render,
    summary_columns,
    type_name,
)
from sweepgrok.store.sink import (
    GEOMETRY_SCHEMA,
    KEYS,
    METRICS_SCHEMA,
    RUN_FIELDS,
    RUNS_SCHEMA,
    STATUSES,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "outputs.md"


def test_committed_reference_is_current():
    assert DOC.read_text() == render(), (
        f"docs/outputs.md is stale (a column or its meaning changed): run `{REGENERATE}`"
    )


def test_module_prints_the_reference():
    out = subprocess.run(
        [sys.executable, "-m", "sweepgrok.store.columns"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    assert out == render()


def test_schemas_are_the_declared_columns_in_order():
    assert [(f.name, f.type) for f in METRICS_SCHEMA] == [(c.name, c.type) for c in METRICS_COLUMNS]
    assert [(f.name, f.type) for f in GEOMETRY_SCHEMA] == [
        (c.name, c.type) for c in GEOMETRY_COLUMNS
    ]
    assert [(c.name, c.type) for c in RUNS_COLUMNS] == RUN_FIELDS
    # runs/: its own columns first, then one per config key (dotted), nothing else.
    assert RUNS_SCHEMA.names[: len(RUN_FIELDS)] == [name for name, _ in RUN_FIELDS]
    assert all("." in name for name in RUNS_SCHEMA.names[len(RUN_FIELDS):])
    assert {name: list(folder.key) for name, folder in FOLDERS.items()} == KEYS


def test_the_schemas_are_those_existing_sweep_folders_were_written_with():
    # Sweep folders on disk are read with these schemas: a column is only ever appended.
    assert METRICS_SCHEMA.names[:8] == ["run_id", "step", "train_loss", "train_acc", "test_loss",
                                        "test_acc", "weight_norm", "wall_time"]
    assert METRICS_SCHEMA.field("fourier_freqs").type == pa.string()
    assert GEOMETRY_SCHEMA.field("attn_entropy").type == pa.list_(pa.float64())
    assert RUNS_SCHEMA.field("censored").type == pa.bool_()
    grok = RUNS_SCHEMA.names.index("grok_step")
    assert RUNS_SCHEMA.names[grok + 1 : grok + 1 + len(GROK_STEP_COLUMNS)] == list(
        GROK_STEP_COLUMNS
    )


@pytest.mark.parametrize("folder", list(FOLDERS))
def test_names_are_unique_and_every_column_means_something(folder):
    columns = FOLDERS[folder].columns
    names = [c.name for c in columns]
    assert len(names) == len(set(names))
    assert set(FOLDERS[folder].key) <= set(names)
    for column in columns:
        assert column.meaning.strip(), f"{folder}/{column.name} has no meaning"
        assert "\n" not in column.meaning and "\n" not in column.unit


def test_only_metrics_columns_have_panels_and_only_runs_columns_are_summaries():
    assert not any(c.panel for c in (*RUNS_COLUMNS, *GEOMETRY_COLUMNS))
    assert not any(c.summary for c in (*METRICS_COLUMNS, *GEOMETRY_COLUMNS))
    numeric = {c.name for c in RUNS_COLUMNS
               if pa.types.is_integer(c.type) or pa.types.is_floating(c.type)
               or pa.types.is_boolean(c.type)}
    assert set(summary_columns()) <= numeric


def test_progress_panels_group_the_columns_by_panel_in_order():
    panels = progress_panels()
    assert panels[0] == ("weight norm (L2)",
                         ("weight_norm", "weight_norm_embed", "weight_norm_unembed"))
    assert [label for label, _ in panels] == list(dict.fromkeys(
        c.panel for c in METRICS_COLUMNS if c.panel))


def test_every_status_is_explained_in_the_status_column():
    status = next(c for c in RUNS_COLUMNS if c.name == "status")
    assert tuple(STATUS_MEANINGS) == STATUSES
    assert all(f"`{s}`" in status.meaning for s in STATUSES)


def test_every_column_has_one_row_in_its_folder_section():
    for folder in FOLDERS.values():
        section = folder_section(folder)
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        assert [r.split("`")[1] for r in rows] == [c.name for c in folder.columns]
        assert all(r.replace("\\|", "").count("|") == 5 for r in rows)  # four cells


def test_types_read_as_a_user_reads_them():
    assert type_name(pa.float64()) == "float64"
    assert type_name(pa.int64()) == "int64"
    assert type_name(pa.list_(pa.float64())) == "list<float64>"
    assert type_name(pa.bool_()) == "bool"
