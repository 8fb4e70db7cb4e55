"""`sweepgrok analyze`: grokking-delay statistics of sweep folders, from Parquet alone.

stats, plots (and so pandas, scipy, matplotlib) are imported inside the command, so that
`sweepgrok --help` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    import pandas as pd


class Threshold(StrEnum):
    """Test accuracy that defines grokking."""

    p95 = "0.95"
    p99 = "0.99"


class Format(StrEnum):
    """Output format: a rich table for the terminal, csv / markdown / json for papers."""

    table = "table"
    csv = "csv"
    markdown = "markdown"
    json = "json"


# AnalysisError.param -> the option a user typed.
_HINTS = {"by": "'--by'", "baseline": "'--baseline'"}


def analyze(
    sweep_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="SWEEP_DIR",
            help="Sweep folders (with runs/ and metrics/); several are analysed together.",
            exists=True,
            file_okay=False,
            dir_okay=True,
        ),
    ],
    by: Annotated[
        str | None,
        typer.Option(help="Comma-separated config keys to group by (default: those that vary)."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="Baseline runs as key=value[,key=value]: adds speed-up and log-rank p."),
    ] = None,
    threshold: Annotated[
        Threshold | None,
        typer.Option(
            help="Test accuracy that defines grokking [default: the runs' train.grok_threshold "
            "when they share 0.95 or 0.99, else 0.99]."
        ),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    plots: Annotated[
        Path | None, typer.Option(help="Write every figure that applies (PNG) to this folder.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the output to this file instead of stdout.")
    ] = None,
    n_boot: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Grokking statistics per group: success rate, grok step, delay, Kaplan-Meier median,
    speed-up vs a baseline. Reads Parquet only (no Ray, no torch)."""
    from sweepgrok import stats

    _check_sweep_dirs(sweep_dirs)
    try:
        metrics, summary, keys = _load(sweep_dirs, by)
        theta = float(threshold.value) if threshold else stats.default_threshold(summary)
        table = stats.analysis_table(
            summary, keys, baseline, threshold=theta, n_boot=n_boot, seed=seed
        )
    except stats.AnalysisError as err:
        hint = _HINTS.get(err.param or "", "'SWEEP_DIR...'")
        raise typer.BadParameter(str(err), param_hint=hint) from None
    _emit(render(table, keys, fmt, theta), out)
    if plots is not None:
        from sweepgrok import plots as figures

        for path in figures.plot_all(metrics, summary, keys, plots, theta):
            typer.echo(f"wrote {path}", err=True)


def _load(sweep_dirs: list[Path], by: str | None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(metrics, run summary of the runs with a run row, grouping keys)."""
    from sweepgrok import stats

    metrics, runs = stats.read_sweeps(sweep_dirs)
    summary, pending = stats.recorded_runs(stats.run_summary(metrics, runs))
    if pending:
        typer.echo(
            f"note: {pending} run(s) have metrics but no runs/ row yet (still running?): left out",
            err=True,
        )
    return metrics, summary, stats.resolve_by(summary, _split_keys(by))


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    typer.echo(f"wrote {out}", err=True)


def _split_keys(by: str | None) -> list[str] | None:
    keys = [k.strip() for k in (by or "").split(",") if k.strip()]
    return keys or None


def _check_sweep_dirs(dirs: list[Path]) -> None:
    # Typer checked that each exists; a sweep folder also has runs/ or metrics/ parts in it.
    for d in dirs:
        if not any((d / kind).is_dir() for kind in ("runs", "metrics")):
            raise typer.BadParameter(
                f"{d} is not a sweep folder (no runs/ or metrics/ inside)",
                param_hint="'SWEEP_DIR...'",
            )


# ---------------------------------------------------------------- rendering


def render(table: pd.DataFrame, keys: list[str], fmt: Format, threshold: float) -> str:
    """The analysis table as text in `fmt` (csv and json keep every column, unrounded)."""
    if fmt is Format.csv:
        return str(table.to_csv(index=False))
    if fmt is Format.json:
        return str(table.to_json(orient="records", indent=2)) + "\n"
    headers, rows = display_rows(table, keys)
    if fmt is Format.markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n\n" + legend(threshold, "speedup" in table) + "\n"
    return _rich_text(headers, rows, legend(threshold, "speedup" in table))


def legend(threshold: float, with_baseline: bool) -> str:
    """One paragraph of definitions printed under every human-readable table."""
    text = (
        f"grok = first eval with test_acc >= {threshold:g}; fit = first eval with train_acc >= "
        "0.99; delay = grok - fit. Median/mean among grokked runs [95% bootstrap CI], "
        "± = std/sqrt(n). KM = Kaplan-Meier median counting censored runs "
        "('> N': under half grokked within N steps)."
    )
    if with_baseline:
        text += (
            " Speed-up = baseline KM median / group KM median [95% bootstrap CI] ('> x': the "
            "baseline has no median, x a lower bound); p = two-sided log-rank test vs the "
            "baseline."
        )
    return text


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _steps(x: float) -> str:
    if _nan(x):
        return "-"
    return "inf" if math.isinf(x) else f"{x:,.0f}"


def _with_ci(x: float, lo: float, hi: float, fn: Any = _steps) -> str:
    if _nan(x):
        return "-"
    if _nan(lo) or _nan(hi):
        return fn(x)
    return f"{fn(x)} [{fn(lo)}, {fn(hi)}]"


def _ratio(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def _speedup_cell(r: Mapping[Any, Any]) -> str:
    if r["is_baseline"]:
        return "baseline"
    ratio = r["speedup"]
    if not _nan(ratio) and math.isinf(ratio):  # baseline median > its budget: a lower bound
        return f"> {_ratio(r['speedup_bound'])}"
    if ratio == 0.0:  # this group's median > its budget: an upper bound
        return f"< {_ratio(r['speedup_bound'])}"
    return _with_ci(ratio, r["speedup_lo"], r["speedup_hi"], _ratio)


def _group_cells(r: Mapping[Any, Any]) -> list[str]:
    grokked = f"{r['n_grokked']}/{r['n']} {r['success_rate']:.0%}"
    grokked += f" [{r['success_lo']:.0%}, {r['success_hi']:.0%}]"
    if r.get("n_failed"):  # diverged or failed runs count as not grokked: say how many
        grokked += f", {r['n_failed']} failed"
    mean = _steps(r["grok_mean"])
    if not _nan(r["grok_sem"]):
        mean += f" ± {_steps(r['grok_sem'])}"
    km = _steps(r["km_median"]) if not _nan(r["km_median"]) else f"> {_steps(r['steps_run_max'])}"
    span = "-" if _nan(r["grok_min"]) else f"{_steps(r['grok_min'])} – {_steps(r['grok_max'])}"
    return [
        grokked,
        _with_ci(r["grok_median"], r["grok_median_lo"], r["grok_median_hi"]),
        mean,
        _with_ci(r["delay_median"], r["delay_median_lo"], r["delay_median_hi"]),
        km,
        span,
    ]


def display_rows(table: pd.DataFrame, keys: list[str]) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells for the human-readable formats (table, markdown)."""
    from sweepgrok.stats import format_value

    short = [k.rsplit(".", 1)[-1] for k in keys]
    headers = (short if len(set(short)) == len(short) else list(keys)) or ["group"]
    headers += ["grokked [95% CI]", "median grok [CI]", "mean grok ± se", "median delay [CI]"]
    headers += ["KM median", "min–max"]
    with_baseline = "speedup" in table
    if with_baseline:
        headers += ["speed-up [CI]", "log-rank p"]
    rows = []
    for r in table.to_dict("records"):
        cells = [format_value(r[k]) for k in keys] if keys else [str(r["label"])]
        cells += _group_cells(r)
        if with_baseline:
            p = r["logrank_p"]
            cells += [_speedup_cell(r), "-" if _nan(p) else f"{p:.2g}"]
        rows.append(cells)
    return headers, rows


def _rich_text(headers: list[str], rows: list[list[str]], note: str) -> str:
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False, header_style="bold")
    for h in headers:
        table.add_column(h)
    for r in rows:
        table.add_row(*r)
    console = Console(width=_width(), record=True, file=io.StringIO())
    console.print(table)
    console.print(note, style="dim")
    return console.export_text(styles=False).rstrip("\n") + "\n"


def _width() -> int:
    """The terminal's width on a terminal; 200 into a pipe or file, so cells do not wrap."""
    import shutil
    import sys

    if sys.stdout.isatty():
        return max(80, shutil.get_terminal_size((120, 24)).columns)
    return 200
