"""What a sweep's parent tracker run holds: its sweep file, `analyze`'s table, its report.

Built from the sweep folder alone when the command ends (written into a scratch folder the
tracker then uploads): ``sweep.yaml`` (the grid or search file, as the folder keeps it),
``analysis.md`` and ``analysis.csv`` (`sweepgrok analyze` of the folder, grouped by the keys that
vary, at the runs' own threshold) and ``report.html`` (`sweepgrok report SWEEP_DIR --html` of the
folder, made then: the sweep's report reaches the parent run by default). A report the folder
holds (``report.html``, ``report.md``: written there with ``sweepgrok report SWEEP_DIR --out
SWEEP_DIR``, e.g. with a ``--baseline``) is attached as it is instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sweepgrok.store.sweepdir import SWEEP_FILE

REPORT_FILES = ("report.html", "report.md")
"""Report files attached when they exist (in the sweep folder, or handed to attach_report)."""


def analysis_files(sweep_dir: Path, into: Path) -> list[Path]:
    """analysis.md and analysis.csv of the sweep folder in `into` (none before a run ended)."""
    from sweepgrok.analysis import comparisons, stats
    from sweepgrok.analysis.report_content import result_text
    from sweepgrok.analysis.tables import Format, render

    _, summary, _ = stats.load_recorded_runs([sweep_dir], skip_damaged=True)
    if not len(summary):
        return []
    keys = stats.varying_keys(summary)
    theta = stats.default_threshold(summary)
    table = comparisons.analysis_table(summary, keys, None, threshold=theta)
    out = []
    for fmt, name in ((Format.markdown, "analysis.md"), (Format.csv, "analysis.csv")):
        said = result_text(table, summary, keys, fmt, theta, default=True)
        (into / name).write_text(render(table, keys, fmt, theta) + said)
        out.append(into / name)
    return out


def sweep_files(sweep_dir: Path, into: Path) -> list[Path]:
    """Every file the parent run of `sweep_dir` holds, copied or written into `into`."""
    out = []
    for name in (SWEEP_FILE, *REPORT_FILES):
        if (sweep_dir / name).is_file():
            out.append(Path(shutil.copyfile(sweep_dir / name, into / name)))
    return out + analysis_files(sweep_dir, into)


def report_files(sweep_dir: Path, into: Path) -> list[Path]:
    """report.html of the sweep folder, made in `into` as `sweepgrok report SWEEP_DIR --html`
    makes it (none before a run ended, or when the folder holds a report of its own)."""
    from sweepgrok.analysis.reporting import HTML_FILE, build_report
    from sweepgrok.analysis.stats import AnalysisError

    if any((sweep_dir / name).is_file() for name in REPORT_FILES):
        return []  # sweep_files attaches the folder's own
    try:
        build_report([sweep_dir], into / "report", skip_damaged=True, html=True)
    except AnalysisError:  # no run has ended yet: nothing to report
        return []
    return [Path(shutil.move(into / "report" / HTML_FILE, into / HTML_FILE))]
