"""Quoted figures of the d* x t_s control: the table's rows and the d* claims.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from analysis.claims import DSTAR, GRID
from analysis.quoted.common import REPRODUCTION, Quote, line, p2, ratio, steps


def _grid_cell(g: pd.Series) -> str:
    """'2,000 (7/8)': a d* x t_s cell's KM median at 0.95 and how many grokked."""
    return f"{steps(g['km_median'])} ({g['n_grokked']}/{g['n']})"


def _grid_row(start_step: int) -> str:
    """A row of REPRODUCTION.md's d* x t_s table (t_s 500 from the d* control)."""
    if start_step == 500:
        cells = [_grid_cell(line(DSTAR, f"d*={d}")) for d in (2, 16, 64)]
        name = f"500 (`{DSTAR}`)"
    else:
        cells = [_grid_cell(line(GRID, f"t_s={start_step}, d*={d}")) for d in (2, 16, 64)]
        name = str(start_step)
    return f"| {name} | {' | '.join(cells)} |"


def _grid_ratio(start_step: int, target_dim: int) -> str:
    """'0.45x [0.26, 0.83], log-rank p = 0.012': a d* claim of the grid control."""
    g = line(GRID, f"t_s={start_step}, d*={target_dim}")
    return f"{ratio(g)}, log-rank p = {p2(g['p'])}"


QUOTES: tuple[Quote, ...] = (
    # The d* x t_s control.
    *(Quote(REPRODUCTION, partial(_grid_row, ts)) for ts in (100, 500, 2000)),
    Quote(REPRODUCTION, lambda: f"at t_s 100, {_grid_ratio(100, 2)}; at t_s 2000, "
          f"{_grid_ratio(2000, 2).replace('log-rank ', '')}"),
    Quote(REPRODUCTION, lambda: f"at t_s 100, {ratio(line(GRID, 't_s=100, d*=64'))}"),
    Quote(REPRODUCTION, lambda: f"at t_s 2000, {ratio(line(GRID, 't_s=2000, d*=64'))}"),
    Quote(REPRODUCTION, lambda: f"(p = {p2(line(GRID, 't_s=2000, d*=64')['p'])})"),
)  # fmt: skip
"""The d* x t_s control's quoted figures."""
