"""The `sweepgrok` command line. Heavy imports (torch, ray, optuna, seaborn) happen inside the
command that needs them, so `sweepgrok --help` and `validate` stay fast."""

from __future__ import annotations

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Run and analyse sweeps of grokking experiments.",
    pretty_exceptions_enable=False,
)



@app.callback()
def main() -> None:
    """Run and analyse sweeps of grokking experiments (see `sweepgrok COMMAND --help`)."""


# Each command lives in its own module (cli_*.py) and is registered here, one line each.
from sweepgrok.cli_train import train  # noqa: E402

app.command()(train)
from sweepgrok.cli_launch import launch  # noqa: E402

app.command()(launch)
from sweepgrok.cli_validate import validate  # noqa: E402

app.command()(validate)
from sweepgrok.cli_analyze import analyze  # noqa: E402

app.command()(analyze)
from sweepgrok.cli_search import search  # noqa: E402

app.command()(search)
