"""The test accuracies that define grokking, declared once.

Every run records its grok step at each of GROK_THRESHOLDS (the papers differ: 0.95 and 0.99) in
the runs/ columns ``grok_step_<tag>`` (GROK_STEP_COLUMNS), and at its own
``train.grok_threshold`` (default DEFAULT_GROK_THRESHOLD) in ``grok_step``. The search metrics,
the CLI's ``--threshold`` choices and the analysis defaults are derived from here.
"""

from __future__ import annotations

GROK_THRESHOLDS = (0.95, 0.99)
"""Test accuracies at which the grok step is always computed, ascending."""
DEFAULT_GROK_THRESHOLD = GROK_THRESHOLDS[-1]
"""The default train.grok_threshold, and the analysis threshold when runs do not share one."""


def tag(theta: float) -> str:
    """Column suffix of a threshold: 0.95 -> '95', 0.995 -> '99.5'."""
    return f"{theta * 100:g}"


GROK_STEP_COLUMNS = {f"grok_step_{tag(theta)}": theta for theta in GROK_THRESHOLDS}
"""runs/ column -> its threshold: {"grok_step_95": 0.95, "grok_step_99": 0.99}."""
