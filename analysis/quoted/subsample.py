"""Quoted figures of the GeomDR subsample sweep: its KM medians and ratios, GeomDR's step costs
(from docs/speed.md, where they were measured) and the sweep's own wall clock per step.
"""

from __future__ import annotations

import re

from analysis.claims import SUB
from analysis.quoted.common import (
    REPRODUCTION,
    ROOT,
    Quote,
    line,
    packed_step_seconds,
    ratio,
    steps,
)


def _step_cost(variant: str) -> tuple[str, float]:
    """docs/speed.md's GeomDR step-cost row `variant`: (its range of six runs, its median)."""
    text = (ROOT / "docs" / "speed.md").read_text()
    found = re.search(rf"^\| {re.escape(variant)} \| ([\d.]+-[\d.]+)x \| \**([\d.]+)x", text,
                      re.MULTILINE)
    if found is None:
        raise ValueError(f"docs/speed.md: no step-cost row {variant!r}")
    return found.group(1), float(found.group(2))


def _subsample_cost() -> str:
    """REPRODUCTION.md's GeomDR step costs, as docs/speed.md measured them."""
    (part_range, part), (whole_range, whole) = (
        _step_cost(f"GeomDR subsample {s}, eigh") for s in ("0.1", "1.0"))
    return (f"costs {part:.2f}x a plain step (median of six runs, {part_range}x) against "
            f"{whole:.2f}x ({whole_range}x) for the whole batch (`benchmarks/bench_geomdr`, on "
            f"paper 2's MLP at Z_97; docs/speed.md), i.e. {whole / part:.1f}x less per step")


def _subsample_wall() -> str:
    """The subsample sweep's own wall clock per packed step (all, 25%, 10% of the data)."""
    every, quarter, tenth = (
        packed_step_seconds(SUB, "geomdr.subsample", s) for s in (1, 0.25, 0.1)
    )
    return (f"in this sweep's own wall clock (a shared machine) {every:.2f}, {quarter:.2f} and "
            f"{tenth:.2f} s per packed step of 8 seeds (all, 25%, 10%): {every / tenth:.1f}x")


QUOTES: tuple[Quote, ...] = (
    # GeomDR on a subsample of the batch.
    Quote(REPRODUCTION, lambda: "KM medians "
          f"{steps(line(SUB, 'subsample=1')['km_median'])} (all), "
          f"{steps(line(SUB, 'subsample=0.25')['km_median'])} (25%), "
          f"{steps(line(SUB, 'subsample=0.1')['km_median'])} (10%); means "
          f"{steps(line(SUB, 'subsample=1')['grok_mean'])}, "
          f"{steps(line(SUB, 'subsample=0.25')['grok_mean'])}, "
          f"{steps(line(SUB, 'subsample=0.1')['grok_mean'])}. The ratios "
          f"{ratio(line(SUB, 'subsample=0.25'))} and {ratio(line(SUB, 'subsample=0.1'))}"),
    Quote(REPRODUCTION, _subsample_cost),
    Quote(REPRODUCTION, _subsample_wall),
)  # fmt: skip
"""The subsample sweep's quoted figures."""
