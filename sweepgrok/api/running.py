"""Training and sweeping from Python: ``train`` (one trial, no Ray), ``launch`` (a grid on Ray
Tune) and ``search`` (an Optuna search), each into its sweep folder as the command does.

The commands call ``train_into``, ``run_grid`` and ``run_search`` where their work starts; the
public functions add what a command reads from its options (the config or file, the folder).
A user mistake raises ConfigError with the command line's message. A signal (Ctrl-C, SIGTERM)
stops ``train`` at the next evaluation with a checkpoint, as ``sweepgrok train`` does, and
raises TrainInterrupted: ``resume=True`` continues.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepgrok.config.trial import Config, ConfigError, as_config, device_problem

if TYPE_CHECKING:
    import pandas as pd

    from sweepgrok.config.grid_file import GridSpec
    from sweepgrok.config.search_file import SearchSpec
    from sweepgrok.core.interrupt import Interruption
    from sweepgrok.train.trainrun import TrainFolder

TrialConfig = str | Path | Mapping[str, Any] | Config
"""A trial config: a YAML path, a dict (nested sections, or flat dotted keys) or a Config."""
Overrides = Sequence[str] | Mapping[str, Any] | None
"""Keys over a config: ``--set`` items (``"model.norm=sphere"``) or a flat dict."""
TRAIN_NOTE = "stopping at the next evaluation, with a checkpoint there"
"""What the first signal does to a train."""


class TrainInterrupted(Exception):
    """A signal stopped a train at an evaluation: every row measured and a checkpoint are kept
    (`kept` says what); training again with resume=True continues it."""

    def __init__(self, kept: str, exit_code: int) -> None:
        super().__init__(kept)
        self.kept = kept
        self.exit_code = exit_code
        """130 for SIGINT, 143 for SIGTERM: the command's exit status."""


def trial_config(config: TrialConfig, overrides: Overrides = None) -> Config:
    """The validated trial config, refused (ConfigError) when its device cannot run here."""
    cfg = as_config(config, overrides or ())
    problem = device_problem(cfg.train.device, cfg.train.cuda_graph)
    if problem:
        raise ConfigError(f"{config if isinstance(config, str | Path) else 'config'}: {problem}")
    return cfg


def train(
    config: TrialConfig,
    *,
    overrides: Overrides = None,
    out: str | Path | None = None,
    fresh: bool = False,
    resume: bool = False,
    trackers: Sequence[str] | None = None,
    on_eval: Callable[[Any], None] | None = None,
) -> pd.DataFrame:
    """Train one trial (or its train.seeds in lockstep) without Ray, as ``sweepgrok train``;
    returns the runs/ rows of `out` (default ``runs/<config file stem>``, or ``runs/train``).

    `fresh` deletes `out` first; `resume` continues an interrupted train in it; `trackers` are
    ``--tracker`` values (``mlflow``, ``wandb``); `on_eval` sees each evaluation's report
    (``.step``, ``.metrics``). Raises ConfigError for bad input, TrainInterrupted on a signal.
    """
    from sweepgrok.core.interrupt import handling

    if resume and fresh:
        raise ConfigError("--resume and --fresh exclude each other")
    cfg = trial_config(config, overrides)
    stem = Path(config).stem if isinstance(config, str | Path) else "train"
    folder = Path(out) if out is not None else Path("runs") / stem
    with handling(TRAIN_NOTE, cleanup=True) as intr:
        prepare_out(folder, fresh=fresh)
        progress = None if on_eval is None else (lambda _folder: _Calls(on_eval))
        train_into(cfg, folder, resume=resume, trackers=trackers, intr=intr, progress=progress)
    from sweepgrok.api.reading import read_runs

    return read_runs(folder)


class _Calls:
    """A progress that calls `on_eval` with each evaluation's report."""

    def __init__(self, on_eval: Callable[[Any], None]) -> None:
        self.update = on_eval

    def __enter__(self) -> _Calls:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def prepare_out(out: Path, *, fresh: bool, where: str | None = None) -> None:
    """A train's sweep folder, made (deleted first when `fresh`); ConfigError otherwise."""
    from sweepgrok.store.sweepdir import make_sweep_folder, prepare_train_folder

    with _at(where):
        prepare_train_folder(out, fresh=fresh)
        make_sweep_folder(out)


@contextlib.contextmanager
def _at(where: str | None) -> Iterator[None]:
    """A ConfigError's message led by `where` (the option at fault), as the CLI prints it."""
    try:
        yield
    except ConfigError as err:
        if where is None:
            raise
        raise ConfigError(f"{where}: {err}") from None


def train_into(
    cfg: Config,
    out: Path,
    *,
    resume: bool = False,
    where: str | None = None,
    trackers: Sequence[str] | None = None,
    intr: Interruption | None = None,
    progress: Callable[[TrainFolder], Any] | None = None,
) -> list[dict[str, Any]] | None:
    """Train `cfg` into the sweep folder `out` (see sweepgrok.train.trainrun): its run rows, or
    None when `resume` found every run ended already. `where` leads a folder's error (the
    option that named it); `progress(folder)` is a context manager whose value's
    ``update(report)`` sees each evaluation. Raises ConfigError, sink.PartWriteError (the rows
    before are on disk) and TrainInterrupted (rows and checkpoint kept)."""
    from sweepgrok.core.interrupt import Interrupted, Interruption
    from sweepgrok.store.sink import FirstWriteSink, ParquetSink
    from sweepgrok.trackers import parse_trackers
    from sweepgrok.trackers.base import tracked
    from sweepgrok.train.process import configure_process
    from sweepgrok.train.trainrun import Checkpoints, remove_checkpoint

    intr = intr if intr is not None else Interruption()
    try:
        configure_process(cfg.train)
        trainer, folder, resumed = _prepare(cfg, out, where, resume)
    except KeyboardInterrupt:  # a second signal before training began
        raise TrainInterrupted(f"{out} holds no new rows", intr.exit_code) from None
    if resume and folder.run_ids and not folder.unfinished:
        compact(out)  # a compaction a crash cut short is finished here
        return None
    mirrored = tracked(ParquetSink(out), parse_trackers(trackers),
                       sweep=out.name, sweep_dir=out)
    sink = FirstWriteSink(mirrored, folder.written)
    ckpt = None
    try:
        with (progress(folder) if progress else contextlib.nullcontext(None)) as prog:
            update = prog.update if prog is not None else (lambda report: None)
            ckpt = Checkpoints(folder.checkpoint, cfg.train.checkpoint_every, sink, intr, update)
            rows = trainer.run(sink, ckpt)
    except (Interrupted, KeyboardInterrupt):
        step = ckpt.step if ckpt is not None and ckpt.step is not None else resumed
        _interrupted(trainer, sink, folder, step, intr)
    finally:
        mirrored.close()
    remove_checkpoint(folder)
    compact(out)  # a resumed run's interrupted row goes: one row per run on disk
    return rows


def compact(out: Path) -> None:
    """One row per key on disk (sweepgrok.store.compact). A second signal meanwhile (its
    KeyboardInterrupt) leaves the parts as they are: the readers read them right, and the next
    end compacts them."""
    from sweepgrok.store.compact import compact_sweep

    with contextlib.suppress(KeyboardInterrupt):
        compact_sweep(out)


def _prepare(cfg: Config, out: Path, where: str | None,
             resume: bool) -> tuple[Any, TrainFolder, int | None]:
    """(trainer, what the folder holds, the step resumed from); ConfigError for a folder that
    holds other runs, or a damaged part or checkpoint."""
    from sweepgrok.core.errors import damaged_part_message
    from sweepgrok.store.parts import DamagedPart
    from sweepgrok.train.trainer import CHECKPOINT_FILE, CheckpointError, Trainer
    from sweepgrok.train.trainrun import check_folder, read_folder

    try:
        folder = read_folder(out, cfg.train.grok_threshold)
    except DamagedPart as err:
        if resume:
            raise ConfigError(f"{err.sweep_dir}: {damaged_part_message(err)}") from None
        with _at(where):
            raise ConfigError(f"{out}: already holds runs ({err.part}: {err.reason}): pass "
                              "--fresh to delete it and start over, or choose another --out"
                              ) from None
    trainer = Trainer(cfg, sweep=out.name)
    with _at(where):
        check_folder(folder, trainer.run_ids, resume)
    if not (resume and (folder.checkpoint / CHECKPOINT_FILE).exists()):
        return trainer, folder, None
    try:
        trainer.load_checkpoint(folder.checkpoint)
    except CheckpointError as err:
        raise ConfigError(f"{err}: --fresh starts over") from None
    return trainer, folder, trainer.step


def _interrupted(trainer: Any, sink: Any, folder: TrainFolder, checkpoint: int | None,
                 intr: Interruption) -> None:
    """Keep what was measured; raise TrainInterrupted saying what was kept."""
    from sweepgrok.train.trainrun import kept_text, record_interruption, steps_on_disk

    n = record_interruption(trainer, sink, folder)
    compact(folder.out)  # a second resume's interrupted rows supersede the first's
    kept = kept_text(folder.out, steps_on_disk(folder.out), n, checkpoint)
    raise TrainInterrupted(kept, intr.exit_code)


# ---- sweeps on Ray Tune ---------------------------------------------------------------------


def run_grid(spec: GridSpec, sweep_dir: Path, *, address: str | None = None,
             max_concurrent: int | None = None, resume: bool = False, verbose: bool = False,
             trackers: Sequence[str] | None = None, resume_command: str = "") -> Any:
    """Start Ray (embedded, or the cluster at `address`) and run the grid's trials into
    `sweep_dir`; the tune.grid.Outcome (trials total, ended, failed, interrupted)."""
    from sweepgrok.trackers import parse_trackers
    from sweepgrok.tune.grid import launch_grid

    return launch_grid(spec, sweep_dir, address=address, max_concurrent=max_concurrent,
                       resume=resume, verbose=verbose,
                       trackers=parse_trackers(trackers),
                       resume_command=resume_command)


def run_study(spec: SearchSpec, sweep_dir: Path, record: dict[str, Any], *,
              address: str | None = None, verbose: bool = False,
              trackers: Sequence[str] | None = None, resume_command: str = "") -> Any:
    """Persist the study record, then run the search's trials into `sweep_dir` (what Optuna
    and Tune ended: complete, failed)."""
    from sweepgrok.search.study import write_study_record
    from sweepgrok.trackers import parse_trackers
    from sweepgrok.tune.search import run_search

    write_study_record(sweep_dir, record)
    return run_search(spec, sweep_dir, record, address=address, verbose=verbose,
                      trackers=parse_trackers(trackers),
                      resume_command=resume_command)


def launch(
    grid: str | Path,
    *,
    storage: str | Path | None = None,
    address: str | None = None,
    max_concurrent: int | None = None,
    resume: bool = False,
    fresh: bool = False,
    trackers: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Run every trial of a grid file on Ray Tune, as ``sweepgrok launch``; returns the runs/
    rows of its sweep folder ``<storage>/<name>`` (a failed trial's runs say ``failed``)."""
    from sweepgrok.config.grid_file import load_grid, read_sweep_doc
    from sweepgrok.core import interrupt
    from sweepgrok.store.sweepdir import delete_sweep_folder, keep_sweep_file, prepare_grid_folder

    if resume and fresh:
        raise ConfigError("--resume and --fresh exclude each other")
    if "search" in read_sweep_doc(grid):
        raise ConfigError(f"{grid}: is a search file (has 'search:'): run it with "
                          "`sweepgrok search`")
    spec = load_grid(grid)
    sweep_dir = spec.settings.sweep_dir(storage)
    prepare_grid_folder(sweep_dir, resume=resume, fresh=fresh)
    new_folder = not sweep_dir.exists()
    keep_sweep_file(spec.settings, sweep_dir)
    sweep_dir = sweep_dir.resolve()
    with interrupt.handling():
        try:
            run_grid(spec, sweep_dir, address=address, max_concurrent=max_concurrent,
                     resume=resume, trackers=trackers)
        except ConfigError:  # no node of the cluster can hold a trial: none started
            if new_folder:
                delete_sweep_folder(sweep_dir)
            raise
    from sweepgrok.api.reading import read_runs

    return read_runs(sweep_dir)


def search(
    search_file: str | Path,
    *,
    storage: str | Path | None = None,
    address: str | None = None,
    num_samples: int | None = None,
    max_concurrent: int | None = None,
    resume: bool = False,
    fresh: bool = False,
    trackers: Sequence[str] | None = None,
) -> Any:
    """Run an Optuna search of a search file, as ``sweepgrok search`` (without its plot and its
    confirm: stage, which ``sweepgrok confirm`` runs); writes best_trial.yaml and
    search_summary.json. Returns sweepgrok.search.study.Results: ``.summary`` (best value,
    params, trial), ``.top`` (the best trials), ``.best_yaml``, ``.study``."""
    from sweepgrok.config.search_file import load_search
    from sweepgrok.core import interrupt
    from sweepgrok.search.study import finish, prepare_search_folder
    from sweepgrok.store.sweepdir import delete_sweep_folder, keep_sweep_file

    if resume and fresh:
        raise ConfigError("--resume and --fresh exclude each other")
    for name, value in (("--num-samples", num_samples), ("--max-concurrent", max_concurrent)):
        if value is not None and value < 1:
            raise ConfigError(f"{name}: must be at least 1 (got {value})")
    spec = load_search(search_file).with_overrides(num_samples=num_samples,
                                                   max_concurrent=max_concurrent)
    sweep_dir = spec.sweep_dir(storage)
    record = prepare_search_folder(spec, sweep_dir, resume=resume, fresh=fresh)
    new_folder = not sweep_dir.exists()
    keep_sweep_file(spec.settings, sweep_dir)
    with interrupt.handling():
        try:
            run_study(spec, sweep_dir, record, address=address, trackers=trackers)
        except ConfigError:
            if new_folder:
                delete_sweep_folder(sweep_dir)
            raise
    return finish(spec, sweep_dir, record)
