"""The `sweepgrok` command line: one module per command, shared pieces in ``common``.

Heavy imports (torch, ray, optuna, seaborn) happen inside the command that needs them, so
`sweepgrok --help` and `validate` stay fast. Only this package imports Typer; the library
never imports it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sweepgrok.cli import (
    analyze,
    common,
    confirm,
    launch,
    ls,
    report,
    search,
    status,
    train,
    validate,
)

app = typer.Typer(
    cls=common.PlainErrorGroup,
    add_completion=False,
    no_args_is_help=True,
    help="Run and analyse sweeps of grokking experiments.",
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        from sweepgrok.store.provenance import package_version

        typer.echo(f"sweepgrok {package_version('sweepgrok') or 'unknown (not installed)'}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True,
                     help="Print the installed sweepgrok version and exit."),
    ] = False,
) -> None:
    """Run and analyse sweeps of grokking experiments (see `sweepgrok COMMAND --help`)."""
    common.setup_logging()


# One line per command; each module's function of the same name is the command.
app.command()(train.train)
app.command()(launch.launch)
app.command()(validate.validate)
app.command()(analyze.analyze)
app.command()(report.report)
app.command()(search.search)
app.command()(confirm.confirm)
app.command()(status.status)
app.command()(ls.ls)
