"""Every output column of a sweep folder, declared once: name, Arrow type, unit, meaning.

The Parquet schemas (sweepgrok.store.sink), the tracker keys (sweepgrok.trackers.base), the
progress figure's panels (sweepgrok.analysis.stats) and the column reference docs/outputs.md
are derived from here. A new column is one entry below, then ``python -m
sweepgrok.store.columns > docs/outputs.md``; tests/store/test_columns.py fails when the
committed file is stale.

The order of each tuple is the order of its Parquet schema: existing sweep folders are read
with these schemas, so a column is only ever appended, never renamed, retyped or moved.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pyarrow as pa

from sweepgrok.config.thresholds import GROK_STEP_COLUMNS

REGENERATE = "python -m sweepgrok.store.columns > docs/outputs.md"
"""The command that rewrites docs/outputs.md (named in the file and in the staleness test)."""


@dataclass(frozen=True)
class Column:
    """One Parquet column of a sweep folder."""

    name: str
    """The column's name, as pandas, DuckDB and the trackers see it."""
    type: pa.DataType
    """Its Arrow type in the Parquet schema (every column is nullable)."""
    unit: str
    """What its numbers count ("step", "s", "nats", "fraction [0, 1]"); "" for none."""
    meaning: str
    """One line for a user: what it holds, where it is measured, when it is null."""
    panel: str = ""
    """metrics/ only: the y label of the progress figure's panel that draws the column (the
    columns of one panel are drawn solid, dashed, dotted in this order); "": not drawn."""
    summary: bool = False
    """runs/ only: a number the run ends with, which a tracker shows as a summary value."""


@dataclass(frozen=True)
class Folder:
    """One Parquet folder of a sweep folder: what a row is, its key, its columns."""

    name: str
    """The folder's name in the sweep folder (metrics, geometry, runs)."""
    key: tuple[str, ...]
    """The columns that identify a row; the readers keep the last-written row per key."""
    rows: str
    """What one row is, and what holds for every column (a paragraph of docs/outputs.md)."""
    columns: tuple[Column, ...]
    """Its columns, in schema order."""
    notes: str = ""
    """What a user should know beyond the table (after it in docs/outputs.md)."""


_INT = pa.int64()
_FLOAT = pa.float64()
_TEXT = pa.string()
_ACC = "fraction [0, 1]"
_FREQS = "frequency indices"

STATUS_MEANINGS = {
    "grokked": "stopped at its grok step (`train.stop_after_grok`)",
    "completed": "ran its whole budget and grokked on the way",
    "censored": "did not grok within its budget (or was stopped by a time cap)",
    "diverged": "non-finite loss",
    "failed": "raised an error (`error`)",
    "interrupted": (
        "not ended, stopped by a signal after its last evaluation (`steps_run`; its events so "
        "far): `--resume` continues it and writes its final row, which supersedes this one"
    ),
}
"""The values of runs/ `status`, and what each says about how the run ended."""
STATUSES = tuple(STATUS_MEANINGS)
"""The run statuses, in the order of STATUS_MEANINGS."""
INTERRUPTED = "interrupted"
"""The status of a run not ended: the analysis leaves it out, as it does a run without a run
row (still running)."""
ENDED_STATUSES = tuple(s for s in STATUSES if s != INTERRUPTED)
"""The statuses of a run that ended (its row is final)."""

_RUN_ID = Column(
    "run_id", _TEXT, "",
    "the run's id, the key that joins the three folders; stable across retries and resumes "
    "(a sweep's trial: `<sweep>-<trial id>`, plus `-s<seed>` per packed seed; `sweepgrok "
    "train`: a hash of the run's config)",
)
_STEP = Column("step", _INT, "step", "the optimizer step of the evaluation")


def _grok_step_columns() -> tuple[Column, ...]:
    """grok_step_<tag> per threshold of sweepgrok.config.thresholds (always computed)."""
    return tuple(
        Column(name, _INT, "step",
               f"first evaluation with `test_acc` ≥ {theta:g} (null when it never did)")
        for name, theta in GROK_STEP_COLUMNS.items()
    )


RUNS_COLUMNS: tuple[Column, ...] = (
    _RUN_ID,
    Column("sweep", _TEXT, "", "the sweep folder's name"),
    Column(
        "status", _TEXT, "",
        "how the run ended: "
        + "; ".join(f"`{status}`, {meaning}" for status, meaning in STATUS_MEANINGS.items()),
    ),
    Column("fit_step", _INT, "step",
           "first evaluation with `train_acc` ≥ `train.fit_threshold` (null when it never did)",
           summary=True),
    Column("grok_step", _INT, "step",
           "first evaluation with `test_acc` ≥ the run's own `train.grok_threshold` (null "
           "when censored)", summary=True),
    *_grok_step_columns(),
    Column("censored", pa.bool_(), "",
           "true when the run never grokked (at `train.grok_threshold`) within `steps_run`; "
           "a diverged or failed run is censored too", summary=True),
    Column("steps_run", _INT, "step", "the steps the run trained", summary=True),
    Column("final_train_acc", _FLOAT, _ACC, "`train_acc` at the run's last evaluation",
           summary=True),
    Column("final_test_acc", _FLOAT, _ACC, "`test_acc` at the run's last evaluation",
           summary=True),
    Column("peak_test_acc", _FLOAT, _ACC, "the highest `test_acc` of any evaluation",
           summary=True),
    Column(
        "collapse_step", _INT, "step",
        "collapse onset: first evaluation, from `fit_step` on, where `deff` falls below "
        "`geometry.collapse_fraction` of its running maximum since the fit step (null when "
        "the run recorded no geometry or never fit)",
    ),
    Column("collapse_to_grok", _INT, "step",
           "`grok_step` − `collapse_step` (null when either is)"),
    Column("wall_time", _FLOAT, "s",
           "seconds the run trained, every session of a resumed run included"),
    Column("error", _TEXT, "", "a failed run's error message (the end of its trace)"),
    Column("sweepgrok_version", _TEXT, "", "provenance: the sweepgrok version that ran it"),
    Column("git_commit", _TEXT, "",
           "provenance: HEAD of the sweepgrok checkout that ran it (null outside a git "
           "checkout)"),
    Column("git_dirty", pa.bool_(), "",
           "provenance: true when tracked files of that checkout differed from `git_commit` "
           "(uncommitted changes: the commit alone does not name the code; null outside a git "
           "checkout)"),
    Column("torch_version", _TEXT, "", "provenance: the installed torch version"),
    Column("torch_build", _TEXT, "",
           "provenance: torch's build: its git revision, and its CUDA and cuDNN versions or "
           "`cpu only`"),
    Column("ray_version", _TEXT, "", "provenance: the installed Ray version"),
    Column("host", _TEXT, "", "provenance: the host name of the machine that trained it"),
    Column("device", _TEXT, "",
           "provenance: what the trainer used, `cpu` or `cuda` (`train.device` keeps what the "
           "file wrote)"),
    Column("device_name", _TEXT, "",
           "provenance: what the device is: the GPU's name, or the CPU's model with its vector "
           "flags and the kernel width torch dispatches to (e.g. `AMD EPYC (avx avx2 fma; torch "
           "kernels AVX2)`), and `ATEN_CPU_CAPABILITY` / `MKL_CBWR` when set: the kernels a "
           "bit-for-bit rerun must match"),
    Column("gpu_ids", _TEXT, "",
           "provenance: Ray's GPU ids of the trial, e.g. `1` (empty without a GPU)"),
    Column("node_id", _TEXT, "", "provenance: the Ray node the trial ran on (its hex id)"),
    Column("trial_id", _TEXT, "", "provenance: the Ray Tune trial that trained the run"),
    Column("arm", _TEXT, "",
           "the confirm stage's arm of the run: `search_<rank>` (a searched schedule, 1 = the "
           "search's best) or a reference's name; null outside a confirm stage"),
    Column("finished_at", _TEXT, "",
           "when the row was written, UTC, ISO 8601 to the second"),
)
"""runs/ columns besides the config keys (RUNS_SCHEMA appends one per key)."""

METRICS_COLUMNS: tuple[Column, ...] = (
    _RUN_ID,
    _STEP,
    Column("train_loss", _FLOAT, "nats", "`optim.loss` on the training split"),
    Column("train_acc", _FLOAT, _ACC, "accuracy on the training split"),
    Column("test_loss", _FLOAT, "nats", "`optim.loss` on the test split"),
    Column("test_acc", _FLOAT, _ACC, "accuracy on the test split"),
    Column(
        "weight_norm", _FLOAT, "",
        "L2 norm of all the model's parameters; its square is the sum of the squares of "
        "`weight_norm_embed`, `_pos`, `_unembed`, of geometry/'s per-layer `weight_norm` and "
        "of the Transformer's embedding norm (layernorm or rmsnorm gain and bias, in no group)",
        panel="weight norm (L2)",
    ),
    Column("wall_time", _FLOAT, "s",
           "seconds since the run started (every session of a resumed run included)"),
    Column("lr", _FLOAT, "", "the learning rate at this step (after `optim.warmup_steps`' ramp)"),
    Column("geomdr_lambda", _FLOAT, "",
           "GeomDR's weight λ(t) at this step: 0 before `geomdr.start_step` and when GeomDR is "
           "off, then a cosine ramp to `geomdr.lambda_max`"),
    Column("geomdr_loss", _FLOAT, "",
           "the GeomDR penalty of kind `geomdr.penalty` (the one trained on, before λ) on the "
           "whole training split (null when GeomDR is off or the representation is not "
           "finite)"),
    Column("deff", _FLOAT, "dimensions",
           "D_eff, the participation ratio (Σ μ)² / Σ μ² of the covariance eigenvalues μ of the "
           "last hidden representation on the training subsample (all layers are in geometry/; "
           "null when `geometry.enabled` is false)"),
    Column("rho", _FLOAT, "",
           "mean Euclidean distance to the `geometry.knn_k` nearest neighbours of the "
           "L2-normalized last hidden representation on the training subsample (null when "
           "`geometry.enabled` is false)"),
    Column("fourier_frac", _FLOAT, _ACC,
           "the energy share of the top `geometry.fourier_top` frequencies of the token "
           "embedding (FFT over the vocabulary axis); Z_p tasks with geometry only, else null"),
    Column("fourier_above_chance", _FLOAT, "",
           "`fourier_frac` above chance, (frac − c) / (1 − c), c = top / (p // 2) the share of "
           "`top` frequencies under an even spread: ~0 at random init, 1 for `top` pure "
           "frequencies, comparable across p (null where `fourier_frac` is, or when no "
           "frequency is left beyond the top ones)"),
    Column("fourier_freqs", _TEXT, _FREQS,
           "those top frequencies of the token embedding, comma-separated ints (null where "
           "`fourier_frac` is)"),
    Column("fourier_unembed_frac", _FLOAT, _ACC,
           "as `fourier_frac`, over the classes of the effective unembedding (the readout "
           "rows, unit-normalised for the cosine unembedding)"),
    Column("fourier_unembed_above_chance", _FLOAT, "",
           "as `fourier_above_chance`, for `fourier_unembed_frac`"),
    Column("fourier_unembed_freqs", _TEXT, _FREQS,
           "the top frequencies of the effective unembedding, comma-separated ints (null "
           "where `fourier_unembed_frac` is)"),
    Column("weight_norm_embed", _FLOAT, "",
           "progress measure: L2 norm of the token embedding W_E (the `=` row included on the "
           "Transformer)", panel="weight norm (L2)"),
    Column("weight_norm_pos", _FLOAT, "",
           "progress measure: L2 norm of the positional embedding (Transformer only, else "
           "null)"),
    Column("weight_norm_unembed", _FLOAT, "",
           "progress measure: L2 norm of the unembedding W_U (the MLP: W_U and its bias)",
           panel="weight norm (L2)"),
    Column("logit_norm", _FLOAT, "",
           "progress measure: mean over the training split of ‖z‖₂, z an example's logit "
           "vector", panel="logit norm (train)"),
    Column("collapse_share", _FLOAT, _ACC,
           "progress measure: the fraction of training examples whose loss (`optim.loss`), "
           "computed in float32, is exactly 0: softmax collapse (Prieto et al. 2025, "
           "\"Grokking at the edge of numerical stability\"), where that example's gradient "
           "has vanished in floating point", panel="softmax-collapse share (train)"),
    Column("deff_test", _FLOAT, "dimensions",
           "progress measure: `deff` on the test split, on a fixed, seeded subsample of "
           "min(`geometry.sample`, test size) test examples drawn as the training subsample "
           "is (null when `geometry.enabled` is false)", panel="D_eff, test split"),
    Column("restricted_loss", _FLOAT, "nats",
           "Nanda et al. 2023: `optim.loss` on the test split of the logits keeping only their "
           "components along cos(w_k (s − c)), sin(w_k (s − c)) (s the answer, c the class) for "
           "the key frequencies k, plus each class's mean logit; Transformer on `add` or `sub` "
           "only, else null ([definition](statistics.md))", panel="restricted loss (test)"),
    Column("excluded_loss", _FLOAT, "nats",
           "`optim.loss` on the training split of the logits with those components removed; "
           "same scope", panel="excluded loss (train)"),
    Column("key_freqs", _TEXT, _FREQS,
           "the key frequencies, strongest first, comma-separated: the fewest of the token "
           "embedding's spectrum holding 90% of its non-constant energy, at most 8, read at "
           "each evaluation (same scope)"),
)
"""metrics/ columns: one per measurement of an evaluation."""

_TRANSFORMER = "Transformer only (null for the MLP): "

GEOMETRY_COLUMNS: tuple[Column, ...] = (
    _RUN_ID,
    _STEP,
    Column("layer", _INT, "index",
           "the layer, from 0: Transformer block i or MLP hidden layer i"),
    Column("deff", _FLOAT, "dimensions",
           "D_eff of the hidden representation after the layer, on the training subsample "
           "(null when `geometry.enabled` is false)"),
    Column("rho", _FLOAT, "",
           "`rho` of the representation after the layer, on the training subsample (null when "
           "`geometry.enabled` is false)"),
    Column("top_eig_frac", _FLOAT, _ACC,
           "μ_1 / Σ μ, the top eigenvalue's share of the representation's covariance, on the "
           "training subsample (null when `geometry.enabled` is false)"),
    Column("weight_norm", _FLOAT, "", "L2 norm of the layer's parameters (always)"),
    Column("deff_test", _FLOAT, "dimensions",
           "D_eff of the representation after the layer on the test subsample (null when "
           "`geometry.enabled` is false)"),
    *(
        Column(f"weight_norm_{part}", _FLOAT, "",
               f"{_TRANSFORMER}L2 norm of the block's {matrix}")
        for part, matrix in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V"), ("o", "W_O"))
    ),
    Column("weight_norm_mlp_in", _FLOAT, "",
           f"{_TRANSFORMER}L2 norm of the block's MLP input (W_in, b_in)"),
    Column("weight_norm_mlp_out", _FLOAT, "",
           f"{_TRANSFORMER}L2 norm of the block's MLP output (W_out, b_out)"),
    Column("attn_entropy", pa.list_(_FLOAT), "nats",
           f"{_TRANSFORMER}a list, one value per head (head h at index h): the entropy "
           "−Σ_s p_s ln p_s of the readout (`=`) position's attention weights p over the 3 "
           "positions, mean over the training split; ln 3 = 1.0986 for uniform attention, 0 "
           "when one position takes all"),
)
"""geometry/ columns: one per measurement of a layer at an evaluation."""

FOLDERS = {
    "runs": Folder(
        "runs", ("run_id",),
        "One row per run: how it ended, its provenance, then its config. A run row is written "
        "when the run ends (or is interrupted); the readers keep its last-written row.",
        RUNS_COLUMNS,
        "Then one column per config key, named by its dotted path (`model.norm`), in the "
        "order of [config.md](config.md): `bool`, `int64`, `float64` or `string` as the key "
        "is; list values (`optim.betas`, `train.seeds`, `geomdr.layers`) are stored as their "
        "JSON text so that every tool can group by them.",
    ),
    "metrics": Folder(
        "metrics", ("run_id", "step"),
        "One row per evaluation of a run. With `train.seeds`, every row is one member's (one "
        "seed's) own values. Definitions of the measures: [statistics.md](statistics.md); the "
        "progress measures are computed in `sweepgrok/train/progress_measures.py` and "
        "`sweepgrok/train/fourier_losses.py`.",
        METRICS_COLUMNS,
    ),
    "geometry": Folder(
        "geometry", ("run_id", "step", "layer"),
        "Long form: one row per layer of a run at an evaluation.",
        GEOMETRY_COLUMNS,
        "Per head in pandas: `read_geometry(d).explode(\"attn_entropy\")` (the head is the "
        "position in the list: `groupby([\"run_id\", \"step\", \"layer\"]).cumcount()`); in "
        "DuckDB `unnest(attn_entropy)` or `attn_entropy[h + 1]`.",
    ),
}
"""The Parquet folders of a sweep folder, in the order docs/outputs.md lists them."""


def schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Parquet schema of `columns`, in their order."""
    return pa.schema([(c.name, c.type) for c in columns])


def progress_panels() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The progress figure's panels: (y label, the metrics/ columns it draws), in the order of
    each panel's first column in METRICS_COLUMNS."""
    panels: dict[str, list[str]] = {}
    for column in METRICS_COLUMNS:
        if column.panel:
            panels.setdefault(column.panel, []).append(column.name)
    return tuple((label, tuple(names)) for label, names in panels.items())


def summary_columns() -> tuple[str, ...]:
    """The runs/ columns a run ends with as numbers (Column.summary), in schema order."""
    return tuple(c.name for c in RUNS_COLUMNS if c.summary)


# ---------------------------------------------------------------- docs/outputs.md

PREAMBLE = f"""\
# Output columns

<!-- Generated from the column declarations in sweepgrok/store/columns.py by
`{REGENERATE}`.
Do not edit by hand: change the declaration, then regenerate. -->

A sweep folder (`<storage>/<name>/`) holds three folders of Parquet part files, which pandas,
DuckDB and Polars read directly:

```python
pd.read_parquet("runs/quick/runs")                                   # pandas (pyarrow)
duckdb.sql("SELECT * FROM read_parquet('runs/quick/runs/*.parquet')")  # DuckDB
pl.read_parquet("runs/quick/runs/*.parquet")                         # Polars
```

(DuckDB and Polars: the `*.parquet` glob; Polars' folder read takes a part being written too).
A retried or resumed run writes its rows again, in new parts; when `launch`, `search` or `train`
ends (a Ctrl-C too), each folder that then holds a key twice is rewritten as one part with one
row per key, the last-written (`sweepgrok/store/compact.py`). So a finished sweep reads one row
per run and per run and step with any tool; while one runs, or after a crash cut one short, a
key can be there twice. `sweepgrok.store.sink.read_runs`, `read_metrics` and `read_geometry`
read one row per key at any moment: they keep the last-written row.

Each folder has one fixed schema: every column is always there, and a value that was not
measured is null. Types are Arrow's (`float64` is pandas' `float64`); a unit "fraction [0, 1]"
is a share, not a percentage; losses are in nats (natural log).
"""


def _escape(text: str) -> str:
    """Make text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def type_name(typ: pa.DataType) -> str:
    """An Arrow type as a user reads it: int64, float64, bool, string, list<float64>."""
    if pa.types.is_list(typ):
        return f"list<{type_name(typ.value_type)}>"
    return {"double": "float64"}.get(str(typ), str(typ))


def _tracker_line(folder: Folder) -> str:
    """What the trackers ([trackers.md](trackers.md)) get of a folder's columns."""
    if folder.name == "metrics":
        return ("A tracker ([trackers.md](trackers.md)) gets every `float64` column of a row "
                "as a series at its `step` (null values left out).")
    if folder.name == "runs":
        names = ", ".join(f"`{name}`" for name in summary_columns())
        return ("A tracker ([trackers.md](trackers.md)) gets the config keys as parameters, "
                f"`status` as text, and {names} and `delay` (= `grok_step` − `fit_step`) as "
                "summary numbers (`censored` as 1 or 0; a null value left out).")
    return ""


def folder_section(folder: Folder) -> str:
    """The Markdown section of one folder: what a row is, its key, the table, the notes."""
    key = ", ".join(f"`{k}`" for k in folder.key)
    lines = [f"## `{folder.name}/`", "", f"{folder.rows} Key: {key}.", "",
             "| column | type | unit | meaning |", "|---|---|---|---|"]
    for c in folder.columns:
        cells = [f"`{c.name}`", type_name(c.type), _escape(c.unit or "-"), _escape(c.meaning)]
        lines.append("| " + " | ".join(cells) + " |")
    extra = [text for text in (folder.notes, _tracker_line(folder)) if text]
    return "\n".join(lines + [""] + [f"{text}\n" for text in extra]).rstrip("\n") + "\n"


def render() -> str:
    """The whole of docs/outputs.md."""
    return "\n".join([PREAMBLE, *(folder_section(f) for f in FOLDERS.values())])


def main() -> None:
    """Print the reference (redirect it to docs/outputs.md)."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
