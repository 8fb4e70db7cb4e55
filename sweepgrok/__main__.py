"""`python -m sweepgrok` runs the CLI."""

from sweepgrok.cli import app

app()
