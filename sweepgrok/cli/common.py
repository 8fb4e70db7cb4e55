"""What every command shares: the one user-error exit, the log handler, the option aliases.

A user mistake (bad file, key, value, option or sweep folder) prints one plain line on stderr,
``error: <file or option>: <key>: <message>`` (sweepgrok.core.errors), and exits 2: from a command
through ``fail``, from Typer's own option parsing through ``PlainErrorGroup``. Never a traceback.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

try:  # recent Typer vendors Click as typer._click (its own exception classes); older uses Click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors  # type: ignore[no-redef]

from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD, GROK_THRESHOLDS, tag
from sweepgrok.core.errors import RUN_FAILED, USER_ERROR, error_line
from sweepgrok.store.outputs import output_problem

if TYPE_CHECKING:
    from rich.console import Console

LOGGER = "sweepgrok"
"""The library's logger; every module logs to a child of it (logging.getLogger(__name__))."""


def fail(message: str, where: str | None = None, code: int = USER_ERROR) -> typer.Exit:
    """Print an error in the one style (no traceback); returns the exit exception to raise
    (exit 2, a user mistake, unless `code` says otherwise: RUN_FAILED for a run cut short)."""
    typer.echo(error_line(message, where), err=True)
    return typer.Exit(code=code)


@contextlib.contextmanager
def analysis_errors() -> Iterator[None]:
    """What reading and analysing sweep folders refuses (stats.AnalysisError: the option at
    fault; parts.DamagedPart: the damaged part file; the Python API's ConfigError, their message
    with its option or folder first: sweepgrok.api.reading.user_errors) as the one error line,
    exit 2."""
    from sweepgrok.api.reading import user_errors
    from sweepgrok.config.trial import ConfigError

    try:
        with user_errors():
            yield
    except ConfigError as err:
        raise fail(str(err)) from None


def cannot_write_rows(err: Exception, then: str) -> typer.Exit:
    """A sweep folder that takes no more rows (sink.PartWriteError: disk full, read-only): what
    is on disk is intact, `then` says how to go on; exit RUN_FAILED, no traceback."""
    message = f"{err}: the part files written before are intact; once there is space, {then}"
    return fail(message, code=RUN_FAILED)


def apply_umask(umask: str | None) -> None:
    """``--umask``: set this process's file-creation mask (octal) before anything is written."""
    if umask is None:
        return
    try:
        mask = int(umask, 8)
    except ValueError:
        mask = -1
    if not 0 <= mask <= 0o777:
        raise fail(f"{umask!r} is not an octal umask from 000 to 777 (e.g. 022, 027, 077)",
                   "--umask")
    os.umask(mask)


def check_resume_fresh(resume: bool, fresh: bool) -> None:
    """--resume and --fresh ask for opposite things."""
    if resume and fresh:
        raise fail("--resume and --fresh exclude each other")


def _usage_error_line(err: Any) -> str:
    """A Click usage error in the one style: ``error: --format: 'x' is not one of ...``."""
    message = str(err.format_message())
    # Click words a bad value "Invalid value for '--format': <why>": the option goes first.
    head, sep, why = message.partition(": ")
    if sep and head.startswith("Invalid value for "):
        return error_line(why, head.removeprefix("Invalid value for ").replace("'", ""))
    return error_line(message)


# ---- help that reads as prose -------------------------------------------------------------------


def prose(text: str | None) -> str | None:
    """Help text as paragraphs of one line each: a docstring's line breaks (its source is wrapped
    at 100 columns) are joined, so the terminal wraps the text at its own width instead of
    breaking sentences where the source did. Paragraphs stay apart (a blank line); one that
    starts with Click's verbatim mark (\\b) is kept as written."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def _allowed_values(param: TyperOption | TyperArgument, ctx: Any) -> str | None:
    """What the help shows beside a parameter instead of its type tag (``<bool>``, ``<path>``):
    the allowed values of a choice (``table|json``), else nothing; the help says what it takes."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or not descriptor.is_choice:
        return None
    return str(param.display_type(ctx)).removeprefix("<").removesuffix(">")


class _ProseOption(TyperOption):
    """An option whose help shows no type tag (a metavar given in the code still shows)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return self.metavar if self.metavar is not None else _allowed_values(self, ctx)


class _ProseArgument(TyperArgument):
    """An argument whose help shows no type tag."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return _allowed_values(self, ctx)


def _prose_params(params: list[Any]) -> list[Any]:
    """`params` with their type tags off. Typer builds each parameter itself (no hook for the
    class) and Click adds --help later, so each is given the subclass here, when help asks for
    the parameters; neither subclass adds state, only the one display method."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _ProseOption
        elif type(param) is TyperArgument:
            param.__class__ = _ProseArgument
    return params


class ProseCommand(TyperCommand):
    """A command whose --help shows no type tags on its parameters (`PlainErrorGroup` makes
    every command of the app one, and rewraps its help)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _prose_params(super().get_params(ctx))


class PlainErrorGroup(TyperGroup):
    """Typer's group, with Click's usage errors in the one error style (not a boxed panel), and
    help that reads as prose: its own and each command's docstring paragraphs rewrapped to the
    terminal (a command's first paragraph is its line in `sweepgrok --help`), no type tags.
    Typer builds the commands before the group, so the group turns each into a `ProseCommand`
    (which adds no state, only the parameter display) and every command registered gets it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = prose(self.help)
        for command in self.commands.values():
            command.help = prose(command.help)
            if type(command) is TyperCommand:
                command.__class__ = ProseCommand

    def get_params(self, ctx: Any) -> list[Any]:
        return _prose_params(super().get_params(ctx))

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_errors.ClickException as err:
            if not isinstance(err, click_errors.NoArgsIsHelpError):  # Typer printed the help
                typer.echo(_usage_error_line(err), err=True)
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        # Non-standalone Click returns a raised Exit's code, or the command's return value.
        sys.exit(code if isinstance(code, int) else 0)


PIPE_WIDTH = 1000
"""Into a pipe or a file without $COLUMNS: tables are laid out as wide as they need (a log has
no right edge; rich would otherwise assume 80 columns)."""


def plain_console(stderr: bool = False) -> Console:
    """A rich console that prints text as given: rich markup is off, so a user's name, path or
    value (``[/]``, ``[bold]x[/]``) is shown literally, never parsed (or refused) as markup.

    Into a pipe or a file no line is broken (soft wrap): a printed command, path or parameter
    list is copied whole from a log; tables take $COLUMNS when set, else the width they need.
    """
    from rich.console import Console

    console = Console(stderr=stderr, markup=False)
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return Console(stderr=stderr, markup=False, soft_wrap=True, width=width)


class PlainLogHandler(logging.Handler):
    """Log records into a pipe or a file as ``LEVEL    message`` lines (rich's handler's look):
    never wrapped, never padded to a width (rich's handler pads every line to its console's)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"{record.levelname:<8} {self.format(record)}\n")  # stderr now:
            sys.stderr.flush()  # a test's capture, or the process's own
        except Exception:  # a closed stream: logging's own policy
            self.handleError(record)


def setup_logging(verbose: bool = False) -> None:
    """One handler on stderr for the ``sweepgrok`` logger (rich's on a terminal, plain lines
    into a pipe or a file): INFO, or DEBUG when verbose."""
    from rich.logging import RichHandler

    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    if not any(getattr(h, "_sweepgrok", False) for h in logger.handlers):
        console = plain_console(stderr=True)
        handler: logging.Handler = (
            RichHandler(console=console, show_time=False, show_path=False, markup=False)
            if console.is_terminal else PlainLogHandler()
        )
        handler._sweepgrok = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


# ---- option aliases shared by several commands ------------------------------------------------

Address = Annotated[
    str | None,
    typer.Option(help="Ray cluster address (default: $RAY_ADDRESS, else an embedded local Ray)."),
]
def _local_storage(storage: Path | None) -> Path | None:
    """--storage is a folder: a URL (s3://...) would become a local folder s3:/... ."""
    from sweepgrok.config.grid_file import local_storage

    if storage is not None:
        try:
            local_storage(str(storage))
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    return storage


Storage = Annotated[
    Path | None,
    typer.Option(
        help="Root of sweep folders (overrides the file's storage).", callback=_local_storage
    ),
]
MaxConcurrent = Annotated[int | None, typer.Option(min=1, help="Cap on trials running at once.")]
Resume = Annotated[
    bool,
    typer.Option(
        "--resume", help="Finish an interrupted sweep (grid: Tune state; search: its study)."
    ),
]
Fresh = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Delete an existing sweep folder of this name first (only a folder sweepgrok "
        "wrote: one with its .sweepgrok marker, or only sweepgrok's own files).",
    ),
]
Umask = Annotated[
    str | None,
    typer.Option(
        help="Octal umask of every file and folder this command writes, e.g. 027 (group reads, "
        "others nothing) or 077 (owner only); default: the shell's. An embedded Ray's workers "
        "inherit it; a cluster's keep their own. Studies and checkpoints are always owner-only.",
        show_default=False,
    ),
]
Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Let Ray's worker output through; debug-level sweepgrok logs."
    ),
]


def _check_trackers(values: list[str] | None) -> list[str] | None:
    """--tracker: a known kind whose library is installed, checked before anything starts."""
    from sweepgrok.trackers import TrackerSpecError, check_installed, parse_trackers
    from sweepgrok.trackers.targets import check_targets

    try:
        specs = parse_trackers(values)
        check_installed(specs)
        check_targets(specs)  # MLflow's file store: refused before anything starts
    except TrackerSpecError as err:
        raise typer.BadParameter(str(err)) from None
    return values


Trackers = Annotated[
    list[str] | None,
    typer.Option(
        "--tracker",
        help="Mirror every run to an experiment tracker: mlflow or mlflow=URI, wandb or "
        "wandb=PROJECT (repeatable). Config as parameters, metrics per step, status and "
        "grok/fit steps as summary; the sweep's parent run gets the sweep file, analyze's table "
        "and report.html when the command ends. A SQLite store keeps artifacts in mlartifacts/ "
        "beside the database. A tracker that fails only warns (the Parquet is the record).",
        callback=_check_trackers,
        show_default=False,
    ),
]


Threshold = StrEnum(  # type: ignore[misc]  # members from GROK_THRESHOLDS
    "Threshold", {f"p{tag(theta)}": f"{theta:g}" for theta in GROK_THRESHOLDS}
)
"""Test accuracy that defines grokking: one of GROK_THRESHOLDS."""


SweepDirs = Annotated[
    list[Path],
    typer.Argument(
        metavar="SWEEP_DIR",
        help="Sweep folders (with runs/ and metrics/), or storage folders holding several: "
        "analysed together (--by sweep tells them apart).",
        exists=True,
        file_okay=False,
        dir_okay=True,
    ),
]
By = Annotated[
    str | None,
    typer.Option(help="Comma-separated config keys to group by (default: those that vary)."),
]
Baseline = Annotated[
    str | None,
    typer.Option(
        help="Baseline as key=value[,key=value] over --by keys: each group is compared with the "
        "baseline of its stratum (the same values of the other --by keys): speed-up, exact "
        "permutation log-rank p, Holm."
    ),
]
Paired = Annotated[
    bool,
    typer.Option(
        "--paired",
        help="Match runs across a group and its baseline by seed (train.seed, task.data_seed): "
        "log-rank stratified by seed and per-seed speed-ups; exit 2 when the seeds differ.",
    ),
]
SkipDamaged = Annotated[
    bool,
    typer.Option(
        "--skip-damaged",
        help="Leave out damaged part files (with a warning each) instead of exiting 2: the "
        "runs in them are missing from every statistic.",
    ),
]
CensorInterrupted = Annotated[
    bool,
    typer.Option(
        "--censor-interrupted",
        help="Keep the runs a signal interrupted (left out by default, until --resume finishes "
        "them): each groks where it did before the signal, else is censored at its last "
        "evaluated step. The signal stopped the sweep, not the run for its outcome, so survival "
        "statistics allow it; the success rate counts such a run as not grokked.",
    ),
]
ThresholdOption = Annotated[
    Threshold | None,
    typer.Option(
        # Parentheses, not brackets: Typer's help reads [...] as rich markup and drops it.
        help="Test accuracy that defines grokking (default: the runs' train.grok_threshold "
        f"when they share {' or '.join(f'{t:g}' for t in GROK_THRESHOLDS)}, else "
        f"{DEFAULT_GROK_THRESHOLD:g})."
    ),
]


def split_keys(by: str | None) -> list[str] | None:
    """``--by k1,k2`` -> [k1, k2] (None: group by what varies)."""
    keys = [k.strip() for k in (by or "").split(",") if k.strip()]
    return keys or None


def check_sweep_dirs(dirs: list[Path]) -> list[Path]:
    """Typer checked that each folder exists: the sweep folders they are (runs/ or metrics/
    inside) or hold (a storage folder: the sweep folders inside it), else exit 2."""
    from sweepgrok.store.storage import NoSweeps, expand_sweep_dirs

    try:
        return expand_sweep_dirs(dirs)
    except NoSweeps as err:
        raise fail(str(err)) from None


def check_output(path: Path | None, option: str, *, folder: bool) -> None:
    """Exit 2 naming `option` unless `path` can be written (checked before any work is done)."""
    problem = None if path is None else output_problem(path, folder=folder)
    if problem:
        raise fail(problem, option)
