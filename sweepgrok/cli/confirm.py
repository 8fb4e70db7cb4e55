"""`sweepgrok confirm SEARCH.yaml|SWEEP`: re-run a search's best schedules on fresh seeds.

The search file's `confirm:` section names the arms: the top-k schedules by search objective
and reference arms (config overrides of the base), each on seeds the search never used. They
run on Ray like a grid, into ``<sweep>/confirm/`` (a sweep folder of its own; every run row
carries its ``arm``), with launch's interruption contract: Ctrl-C keeps every row and
``--resume`` goes on. At the end the confirm table (each arm against every reference, one Holm
family, and the winner's curse of each searched arm) is printed and written to
``search_summary.json`` and ``confirm/confirm_summary.json``. `sweepgrok search` runs this stage
itself when its file has a `confirm:` section and every trial has ended.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from sweepgrok.cli.common import (
    Address,
    Fresh,
    MaxConcurrent,
    Resume,
    Storage,
    Umask,
    Verbose,
    apply_umask,
    cannot_write_rows,
    check_resume_fresh,
    fail,
    plain_console,
    setup_logging,
)
from sweepgrok.cli.interrupted import continue_command, interrupted_exit
from sweepgrok.config.search_file import SearchSpec, load_search
from sweepgrok.config.trial import ConfigError
from sweepgrok.core import interrupt
from sweepgrok.store.sweepdir import SWEEP_FILE

console = plain_console()
SUMMARY_FILE = "confirm_summary.json"
"""The confirm table as JSON, in the stage's folder (search_summary.json gets a copy)."""


def resolve(target: Path, storage: Path | None) -> tuple[SearchSpec, Path]:
    """(the search, its sweep folder) from a search file or a search's sweep folder."""
    if target.is_dir():
        spec = load_search(target / SWEEP_FILE)
        return spec, target
    spec = load_search(target)
    return spec, spec.sweep_dir(storage)


def confirm(
    target: Annotated[
        Path,
        typer.Argument(metavar="SEARCH.yaml|SWEEP", show_default=False,
                       help="The search file, or the search's sweep folder."),
    ],
    address: Address = None,
    storage: Storage = None,
    max_concurrent: MaxConcurrent = None,
    resume: Resume = False,
    fresh: Fresh = False,
    umask: Umask = None,
    verbose: Verbose = False,
) -> None:
    """Re-run a search's best schedules and its reference arms on fresh seeds, then compare
    them on those seeds alone (the search's best is partly its luckiest)."""
    check_resume_fresh(resume, fresh)
    apply_umask(umask)
    setup_logging(verbose)
    try:
        spec, sweep_dir = resolve(target, storage)
    except ConfigError as err:
        raise fail(str(err)) from None
    again = continue_command("confirm", target, storage=storage, address=address, umask=umask)
    run_stage(spec, sweep_dir.resolve(), again, address=address, resume=resume, fresh=fresh,
              max_concurrent=max_concurrent, verbose=verbose)  # fmt: skip


def run_stage(
    spec: SearchSpec,
    sweep_dir: Path,
    again: str,
    *,
    address: str | None = None,
    resume: bool = False,
    fresh: bool = False,
    max_concurrent: int | None = None,
    verbose: bool = False,
) -> None:
    """Choose (or read back) the arms, run them, print and write the confirm table."""
    from sweepgrok.search.confirm import confirm_dir

    folder = confirm_dir(sweep_dir)
    try:
        stage, grid = prepare(spec, sweep_dir, resume=resume, fresh=fresh)
    except ConfigError as err:
        raise fail(str(err)) from None
    from sweepgrok.store.sink import PartWriteError
    from sweepgrok.tune.grid import launch_grid

    console.print(f"confirm stage: {len(stage.arms)} arms x {len(stage.seeds)} fresh seeds "
                  f"({', '.join(a.name for a in stage.arms)}) in {folder}", soft_wrap=True)
    with interrupt.handling():
        try:
            outcome = launch_grid(grid, folder, address=address, max_concurrent=max_concurrent,
                                  resume=resume, verbose=verbose, resume_command=again)
        except PartWriteError as err:
            raise cannot_write_rows(err, f"`{again}` continues") from None
    if interrupt.requested() is not None:
        raise interrupted_exit(folder, again)  # the counts `sweepgrok status` gives
    report(stage, sweep_dir)
    if outcome.unfinished or outcome.errored:
        console.print(f"{outcome.errored} trial(s) failed, {outcome.unfinished} unfinished: "
                      f"`{again}` finishes them", soft_wrap=True)
        raise typer.Exit(code=1)


def prepare(spec: SearchSpec, sweep_dir: Path, *, resume: bool, fresh: bool) -> tuple[Any, Any]:
    """(stage, GridSpec): the recorded stage on --resume, else a new one from the study."""
    from sweepgrok.config.grid_file import GridSpec, load_grid
    from sweepgrok.search import confirm as stages
    from sweepgrok.search.study import load_study, read_study_record, top_trials
    from sweepgrok.store.outputs import write_text
    from sweepgrok.store.sweepdir import make_sweep_folder, prepare_grid_folder

    if spec.confirm is None:
        raise ConfigError(f"{spec.settings.source}: has no confirm: section (docs/search.md)")
    record = read_study_record(sweep_dir)
    if record is None:
        raise ConfigError(f"{sweep_dir}: holds no search (no study.json): run the search first")
    folder = stages.confirm_dir(sweep_dir)
    prepare_grid_folder(folder, resume=resume, fresh=fresh)
    stage = None if fresh else stages.read_stage(folder)
    if stage is not None and not resume:
        raise ConfigError(f"{folder}: already holds a confirm stage: pass --resume to finish "
                          "it, or --fresh to delete it and start over")  # fmt: skip
    if stage is None:
        study = load_study(record)
        stage = stages.new_stage(spec, study.study_name, top_trials(study, spec.confirm.top_k))
    trials = stages.arm_trials(spec, stage)
    make_sweep_folder(folder)
    grid_file = folder / SWEEP_FILE
    if not grid_file.exists():  # once: a resume keeps the first (as for a grid's copy)
        write_text(grid_file, stages.grid_doc(spec, stage, trials, f"{spec.name}-{folder.name}"))
    write_text(folder / stages.ARMS_FILE, stages.stage_json(stage))
    grid = load_grid(grid_file)
    if [t.flat for t in grid.trials] != [t.flat for t in trials]:
        raise ConfigError(f"{grid_file}: its trials are not this stage's: start the stage over "
                          "with --fresh")  # fmt: skip
    return stage, GridSpec(grid.settings, trials, ["arm"])


def report(stage: Any, sweep_dir: Path) -> Any:
    """Print the confirm table and its result line; write it to the summaries."""
    from sweepgrok.analysis.confirm_table import as_records, confirm_table, plain, result_line
    from sweepgrok.analysis.stats import summarize_sweeps
    from sweepgrok.search.confirm import confirm_dir

    folder = confirm_dir(sweep_dir)
    table = confirm_table(summarize_sweeps(folder), stage)
    console.print(f"confirm: grok at {stage.threshold:g}, search seeds "
                  f"{', '.join(map(str, stage.search_seeds))}, fresh seeds "
                  f"{', '.join(map(str, stage.seeds))}", soft_wrap=True)  # fmt: skip
    console.print(plain(table, stage), soft_wrap=True, highlight=False, markup=False)
    line = result_line(table, stage)
    console.print(line, soft_wrap=True, highlight=False)
    write_summaries(stage, sweep_dir, as_records(table), line)
    return table


def write_summaries(stage: Any, sweep_dir: Path, records: list[dict[str, Any]], line: str) -> None:
    """confirm/confirm_summary.json, and a `confirm` entry in search_summary.json."""
    from dataclasses import asdict

    from sweepgrok.search.confirm import confirm_dir
    from sweepgrok.search.study import SUMMARY_FILE as SEARCH_SUMMARY
    from sweepgrok.store.outputs import write_text

    entry = {
        "result": line, "threshold": stage.threshold, "search_seeds": stage.search_seeds,
        "confirm_seeds": stage.seeds, "arms": [asdict(a) for a in stage.arms],
        "holm_family": "every arm-vs-reference comparison of the stage", "table": records,
    }  # fmt: skip
    text = json.dumps(entry, indent=2, default=str) + "\n"
    write_text(confirm_dir(sweep_dir) / SUMMARY_FILE, text)
    search_summary = sweep_dir / SEARCH_SUMMARY
    if search_summary.is_file():
        try:
            whole = json.loads(search_summary.read_text())
        except ValueError:
            whole = {}
        whole["confirm"] = entry
        write_text(search_summary, json.dumps(whole, indent=2, default=str) + "\n")

