"""`sweepgrok search SEARCH.yaml`: an Optuna search for the fastest-grokking schedule.

The study persists in the sweep folder (``optuna.db``, or ``optuna.journal``), named in
``study.json``, so ``--resume`` continues it and ``optuna-dashboard`` opens it (the command is
printed at the start and at the end). Every trial's rows land in the same Parquet layout as a
grid. Optuna and Ray are imported only after the search file has been validated and the sweep
folder checked: a user mistake exits 2, writes nothing.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from sweepgrok.cli.common import (
    Address,
    Fresh,
    MaxConcurrent,
    Resume,
    Storage,
    Trackers,
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
from sweepgrok.store.sweepdir import delete_sweep_folder, keep_sweep_file

console = plain_console()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def top_table(spec: SearchSpec, results: Any) -> Table:
    """The k best trials: objective, capped step, then the searched keys."""
    table = Table(
        title=f"top {len(results.top)} trials ({spec.metric}, {spec.mode})", title_justify="left"
    )
    for col in ("#", "objective", "capped at"):
        table.add_column(col, justify="right")
    keys = [d.key for d in spec.space]
    for key in keys:
        table.add_column(key)
    for t in results.top:
        capped = t.user_attrs.get("capped_at")
        # A value past the budget is a censored run's score, not a grok step: say so.
        value = _fmt(t.value) + (" (censored)" if float(t.value) > spec.budget else "")
        cells = [str(t.number), value, "-" if capped is None else str(capped)]
        table.add_row(*cells, *(_fmt(t.params.get(k)) for k in keys))
    return table


def plot_objective(spec: SearchSpec, sweep_dir: Path, results: Any) -> None:
    """Draw <sweep>/objective.png (the objective per trial) into `results` once a trial has a
    value; a slim install without matplotlib gets the reason instead."""
    if results.summary["best_value"] is None:
        return
    from sweepgrok.search.study import PLOT_FILE, trial_values

    try:
        from sweepgrok.analysis.plots import plot_objective as draw

        results.plot = draw(
            trial_values(results.study, spec.budget),
            sweep_dir / PLOT_FILE,
            budget=spec.budget,
            mode=spec.mode,
            title=f"{results.study.study_name}: {spec.metric} ({spec.mode})",
        )
    except ImportError as err:  # matplotlib is a dependency, but a slim install may lack it
        results.plot_error = str(err)


def print_results(spec: SearchSpec, sweep_dir: Path, results: Any) -> None:
    """Top-k table, best schedule, importances, compute saved, written files."""
    s = results.summary
    console.print(top_table(spec, results))
    if s["best_value"] is None:
        console.print("no trial has finished yet")
        return
    params = ", ".join(f"{k}={_fmt(v)}" for k, v in s["best_params"].items())
    console.print(
        f"best schedule (trial #{s['best_trial']}, objective {s['best_value']:g}): {params}",
        highlight=False,
    )
    from sweepgrok.search.study import IMPORTANCE_CAVEAT

    imp = results.importances
    if isinstance(imp, str):
        console.print(f"parameter importances: {imp}")
    else:
        cells = (f"{k} {v['importance']:.2f} [{v['lo']:.2f}, {v['hi']:.2f}]"
                 for k, v in imp.items())  # fmt: skip
        console.print("parameter importances: " + ", ".join(cells), highlight=False, soft_wrap=True)
        console.print(IMPORTANCE_CAVEAT, highlight=False, soft_wrap=True)
    console.print(f"search seeds: {', '.join(map(str, spec.search_seeds))}"
                  + (f"; confirm seeds: {', '.join(map(str, spec.confirm.seeds))}"
                     if spec.confirm is not None else ""), highlight=False)  # fmt: skip
    c = results.compute
    if spec.time_cap:
        console.print(
            f"time cap: {c['capped_runs']} of {c['runs']} runs capped; ran {c['steps_run']} "
            f"steps instead of {c['steps_without_cap']} ({100 * c['saved_fraction']:.1f}% saved)",
            highlight=False,
        )
    console.print(f"best trial config: {results.best_yaml}  (sweepgrok train {results.best_yaml})")
    if results.plot is not None:
        console.print(f"plot: {results.plot}")
    elif results.plot_error:
        console.print(f"no plot: {results.plot_error}")
    console.print(f"study: {s['study_name']} in {sweep_dir}", highlight=False)


def print_dashboard_command(record: dict[str, Any]) -> None:
    """The optuna-dashboard command that serves the study, on one line (never wrapped: it is
    copied and pasted), preceded by the install command when the extra is missing."""
    import importlib.util
    import shlex

    from sweepgrok.search.study import DASHBOARD_EXTRA, dashboard_command

    command = shlex.join(dashboard_command(record))
    if importlib.util.find_spec("optuna_dashboard") is None:
        command = f"{DASHBOARD_EXTRA}, then {command}"
    console.print(f"study dashboard: {command}", highlight=False, soft_wrap=True)


def search(
    search_file: Annotated[
        Path, typer.Argument(metavar="SEARCH.yaml", help="Search file (YAML).", show_default=False)
    ],
    address: Address = None,
    storage: Storage = None,
    num_samples: Annotated[
        int | None, typer.Option(min=1, help="Trials in the study (a --resume tops up to it).")
    ] = None,
    max_concurrent: MaxConcurrent = None,
    resume: Resume = False,
    fresh: Fresh = False,
    umask: Umask = None,
    verbose: Verbose = False,
    tracker: Trackers = None,
) -> None:
    """Search config keys (GeomDR schedule, ...) with Optuna for the fastest grokking.

    A trial that can no longer beat the best grok step is stopped there (exact time cap).

    Writes <sweep>/best_trial.yaml, search_summary.json, objective.png; the study is optuna.db.
    With a confirm: section, the best schedules and the reference arms are then re-run on fresh
    seeds (as `sweepgrok confirm` does).
    """
    check_resume_fresh(resume, fresh)
    apply_umask(umask)
    setup_logging(verbose)
    try:
        spec = load_search(search_file).with_overrides(
            num_samples=num_samples, max_concurrent=max_concurrent
        )
        sweep_dir = spec.sweep_dir(storage)
        from sweepgrok.search.study import prepare_search_folder

        record = prepare_search_folder(spec, sweep_dir, resume=resume, fresh=fresh)
        new_folder = not sweep_dir.exists()
        keep_sweep_file(spec.settings, sweep_dir)  # creates the folder and its marker
    except ConfigError as err:
        raise fail(str(err)) from None
    from sweepgrok.store.sink import PartWriteError

    print_dashboard_command(record)
    extra = [] if num_samples is None else ["--num-samples", str(num_samples)]
    command = partial(continue_command, "search", search_file, storage=storage,
                      address=address, umask=umask, tracker=tracker, extra=extra)
    again, again_anywhere = command(), command(absolute=True)
    with interrupt.handling():
        try:
            outcome = run(spec, sweep_dir, record, address, verbose, tracker, again_anywhere)
        except ConfigError as err:  # no node of the cluster can hold a trial: none started
            if new_folder:  # leave nothing behind: no study record, a fresh start next time
                delete_sweep_folder(sweep_dir)
            raise fail(str(err)) from None
        except PartWriteError as err:  # the study and Tune's state are saved: --resume goes on
            raise cannot_write_rows(err, f"`{again}` continues") from None
    from sweepgrok.search.study import finish, finished_count

    if interrupt.requested() is not None:
        # No summary or plot: the search is not over (--resume writes them when it is).
        raise interrupted_exit(sweep_dir.resolve(), again)

    results = finish(spec, sweep_dir, record)
    plot_objective(spec, sweep_dir, results)
    print_results(spec, sweep_dir, results)
    print_dashboard_command(record)
    done = finished_count(results.study)
    if done < spec.num_samples or outcome["errored"]:
        console.print(
            f"{done} of {spec.num_samples} trials finished, {outcome['errored']} "
            f"failed: `{again}` continues",
            soft_wrap=True,
        )
        raise typer.Exit(code=1)
    if spec.confirm is not None:  # the search has ended: its best re-run on fresh seeds
        from sweepgrok.cli.confirm import run_stage

        stage_again = continue_command("confirm", search_file, storage=storage,
                                       address=address, umask=umask)  # fmt: skip
        run_stage(spec, sweep_dir.resolve(), stage_again, address=address, resume=True,
                  verbose=verbose)  # fmt: skip


def run(
    spec: SearchSpec,
    sweep_dir: Path,
    record: dict[str, Any],
    address: str | None,
    verbose: bool = False,
    tracker: list[str] | None = None,
    resume_command: str = "",
) -> Any:
    """Persist the study record, then run the trials (sweepgrok.api.running.run_study)."""
    from sweepgrok.api.running import run_study

    return run_study(spec, sweep_dir, record, address=address, verbose=verbose,
                     trackers=tracker, resume_command=resume_command)
