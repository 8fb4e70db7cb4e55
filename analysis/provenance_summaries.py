"""Add each run's provenance (code commit and dirty flag, versions, torch build, device) to a
committed runs.csv, or say what is unknown; give a `sweepgrok train` summary its config.

    python -m analysis.provenance_summaries SWEEP_DIR SUMMARY_DIR
    python -m analysis.provenance_summaries --unknown SUMMARY_DIR
    python -m analysis.provenance_summaries --config TRIAL_YAML SUMMARY_DIR

Every run row in a sweep's ``runs/`` Parquet holds the provenance columns
(sweepgrok.store.provenance); a report's runs.csv keeps them (`COLUMNS`), but summaries made
before it did lack them. The first form copies them from the sweep's Parquet into the summary,
per run_id. The second fills a summary whose Parquet is gone (the Parquet is not committed)
with what its own committed text allows (`backfill`) and an explicit unknown elsewhere, rather
than guessing from the history. The third writes the config columns of a `sweepgrok train`
summary (which held only a few) from its trial file, after checking that the file gives every
run's id.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweepgrok.config.tasks import split_seed_for
from sweepgrok.config.trial import Config, config_hash, flatten, load_config, update
from sweepgrok.core.errors import USER_ERROR, error_line
from sweepgrok.store.provenance import SUMMARY_PROVENANCE
from sweepgrok.store.sink import read_runs

COLUMNS = SUMMARY_PROVENANCE
"""The provenance every committed summary row carries."""
UNKNOWN = "unknown (before provenance)"
"""The code of a summary made before runs.csv carried provenance: its runs' Parquet rows held
it, but were not committed, so the code that ran them is not known from committed files."""
NOT_RECORDED = "unknown (not recorded)"
"""torch's version and build, the device and the dirty flag of a run made before runs.csv kept
them (and, for the dirty flag, torch's build and the device's name, before the run rows held
them): not known from committed files."""
CODE_COLUMNS = ("git_commit", "sweepgrok_version")
CPU_SUFFIX = "_cpu"
"""The project's name for a summary of runs on its CPU machine (train.device auto on a machine
without a GPU): such a summary's device is `cpu`, its CPU's model still unknown."""


def unknown_text(column: str) -> str:
    """What an unknown cell of `column` says."""
    return UNKNOWN if column in CODE_COLUMNS else NOT_RECORDED


def add_provenance(summary: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The summary with COLUMNS from the runs/ rows (replacing earlier ones); unknown for a
    run the rows lack or a value they do not hold (a checkout outside git, an older version)."""
    values = runs.set_index("run_id").reindex(columns=list(COLUMNS)).astype(object)
    kept = summary.drop(columns=[c for c in COLUMNS if c in summary])
    return kept.join(values, on="run_id").fillna({c: unknown_text(c) for c in COLUMNS})


def backfill(row: dict[str, str], folder: str) -> dict[str, str]:
    """The provenance a summary's own text gives, for its empty cells: a device column holding
    a GPU's name (an older train summary's) is that device's name on `cuda`; a summary named
    *_cpu ran on `cpu`. Every other empty cell: `unknown_text`."""
    out = dict(row)
    device = out.get("device", "")
    if device and device != "cpu" and not device.startswith("cuda"):
        out["device"], out["device_name"] = "cuda", out.get("device_name") or device
    elif not device and folder.endswith(CPU_SUFFIX):
        out["device"] = "cpu"
    return {k: v or unknown_text(k) if k in COLUMNS else v for k, v in out.items()}


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _write(path: Path, header: Sequence[str], body: Sequence[dict[str, str]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(body)


def mark_unknown(path: Path) -> None:
    """Give every row of the runs.csv at `path` the COLUMNS: `backfill` where the summary's
    text allows it, unknown elsewhere. Text in, text out (csv module): every other cell keeps
    its exact characters, where a pandas round trip would rewrite some (an integer column with
    gaps as floats)."""
    header, body = _read(path)
    header += [c for c in COLUMNS if c not in header]
    rows = [backfill({k: row.get(k) or "" for k in header}, path.parent.name) for row in body]
    _write(path, header, rows)


def code_versions(runs: pd.DataFrame) -> str:
    """The distinct code commits of some runs, as text ('unknown (before provenance)' or
    short hashes joined by ' + ', which says a summary mixes code versions)."""
    if "git_commit" not in runs:
        return UNKNOWN
    commits = sorted({str(c) for c in runs["git_commit"].fillna(UNKNOWN)})
    return " + ".join(c if c == UNKNOWN else c[:7] for c in commits)


def _cell(value: object) -> str:
    """A config value as a report's runs.csv writes it (pandas: a list in brackets, None
    empty)."""
    if value is None:
        return ""
    return str(list(value)) if isinstance(value, tuple | list) else str(value)


def add_train_config(path: Path, trial: Config) -> None:
    """Write into the runs.csv of a `sweepgrok train` summary at `path` every config column it
    lacks, each run's from `trial` with its seeds (train.seeds = the summary's train.seed):
    the member config the trainer recorded, with the split seed it used. Refused (ValueError)
    unless that config hashes to every row's run_id, so no column is guessed. Text in, text out;
    the new columns go before the provenance ones."""
    header, body = _read(path)
    seeds = [int(row["train.seed"]) for row in body]
    cfg = update(trial, {"train.seeds": seeds})
    # The member config the trainer records (its _member_config); the run ids below check it.
    members = [update(cfg.member(s), {"task.data_seed": split_seed_for(cfg.task, s)})
               for s in seeds]  # fmt: skip
    wrong = [row["run_id"] for row, m in zip(body, members, strict=True)
             if config_hash(m) != row["run_id"]]  # fmt: skip
    if wrong:
        raise ValueError(f"the trial file does not give run ids {', '.join(wrong)}")
    flat = [flatten(m) for m in members]
    new = [k for k in flat[0] if k not in header]
    at = min([header.index(c) for c in COLUMNS if c in header] or [len(header)])
    header[at:at] = new
    for row, values in zip(body, flat, strict=True):
        row.update({k: _cell(values[k]) for k in new})
    _write(path, header, body)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the provenance (or config) columns into SUMMARY_DIR/runs.csv (exit 2 with one
    error line)."""
    args = list(sys.argv[1:] if argv is None else argv)
    mode = args[0] if args[:1] in (["--unknown"], ["--config"]) else ""
    if len(args) != (3 if mode == "--config" else 2):
        print(error_line(__doc__.strip().splitlines()[3].strip()), file=sys.stderr)
        return USER_ERROR
    path = Path(args[-1]) / "runs.csv"
    if not path.is_file():
        print(error_line(f"{path}: no such file"), file=sys.stderr)
        return USER_ERROR
    if mode == "--unknown":
        mark_unknown(path)
    elif mode == "--config":
        try:
            add_train_config(path, load_config(args[1]))
        except ValueError as err:
            print(error_line(f"{path}: {err}"), file=sys.stderr)
            return USER_ERROR
        print(f"wrote the config columns into {path}")
        return 0
    else:
        add_provenance(pd.read_csv(path), read_runs(Path(args[0]))).to_csv(path, index=False)
    print(f"wrote {', '.join(COLUMNS)} into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
