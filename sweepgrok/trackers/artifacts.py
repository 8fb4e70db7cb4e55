"""What a sweep's parent tracker run holds: its sweep file, `analyze`'s table, its report.

Built from the sweep folder alone when the command ends (written into a scratch folder the
tracker then uploads): ``sweep.yaml`` (the grid or search file, as the folder keeps it),
``analysis.md`` and ``analysis.csv`` (`sweepgrok analyze` of the folder, grouped by the keys that
vary, at the runs' own threshold) and, when the folder holds one, ``report.html``.
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
