"""Speed of the offline analysis on a synthetic sweep: 1,000 runs x 2,000 evaluations.

Writes 2M metric rows as Parquet parts (METRICS_SCHEMA, through sweepgrok.store.sink.write_part) in
a temporary folder, then times reading (projected, deduplicated), the per-run summary and the
group summary. Run: ``python -m benchmarks.bench_analysis [--runs N] [--evals N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TypedDict

import numpy as np
import pyarrow as pa

from sweepgrok.store.sink import METRICS_SCHEMA, RUNS_SCHEMA, to_table, write_part

QUICK_ARGV = ["--runs", "200", "--evals", "500"]
"""`python -m benchmarks.run --quick`: a sweep a twentieth of the full size (seconds)."""
NORMS = ("none", "layernorm", "rmsnorm", "sphere")
TARGET_DIMS = (8, 16, 32, 64, 128)
# Median grok step of each norm (sphere is fast, as in paper 1) and a GeomDR d* effect.
_NORM_MEDIAN = {"none": 30_000.0, "layernorm": 20_000.0, "rmsnorm": 18_000.0, "sphere": 1_500.0}

# The config keys are dotted (runs/ column names), hence the functional form.
SyntheticRun = TypedDict(
    "SyntheticRun",
    {"run_id": str, "sweep": str, "model.norm": str, "geomdr.target_dim": int,
     "train.seed": int, "grok": float},
)
"""A run row of the synthetic sweep, plus its drawn grok step (not a runs/ column)."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))


def synthetic_runs(n_runs: int, seed: int = 0) -> list[SyntheticRun]:
    """Run rows cycling through norm x d* (the rest are seeds), with a drawn grok step."""
    rng = np.random.default_rng(seed)
    rows: list[SyntheticRun] = []
    for i in range(n_runs):
        norm = NORMS[i % len(NORMS)]
        dim = TARGET_DIMS[(i // len(NORMS)) % len(TARGET_DIMS)]
        median = _NORM_MEDIAN[norm] * (1.0 + abs(np.log2(dim / 32)) / 2)
        rows.append(
            {
                "run_id": f"run{i:05d}",
                "sweep": "synthetic",
                "model.norm": norm,
                "geomdr.target_dim": dim,
                "train.seed": i // (len(NORMS) * len(TARGET_DIMS)),
                "grok": float(median * np.exp(rng.normal(0.0, 0.4))),
            }
        )
    return rows


def _metrics_part(runs: list[SyntheticRun], steps: np.ndarray, seed: int) -> pa.Table:
    """Metric rows of `runs` (vectorised: one array per column, no per-row Python)."""
    rng = np.random.default_rng(seed)
    n, m = len(runs), len(steps)
    grok = np.array([r["grok"] for r in runs], dtype=float)[:, None]
    fit = grok / 10.0
    s = steps[None, :].astype(float)
    train = _sigmoid((s - fit) / (0.1 * fit))
    test = 0.02 + 0.98 * _sigmoid((s - grok) / (0.05 * grok)) + rng.normal(0, 0.002, (n, m))
    deff = 20 + 20 * _sigmoid((s - fit) / fit) - 32 * _sigmoid((s - 0.8 * grok) / (0.1 * grok))
    cols = {
        "run_id": pa.array(np.repeat([r["run_id"] for r in runs], m)),
        "step": pa.array(np.tile(steps, n)),
        "train_acc": pa.array(train.ravel()),
        "test_acc": pa.array(np.clip(test, 0.0, 1.0).ravel()),
        "deff": pa.array(deff.ravel()),
    }
    arrays = [cols.get(f.name, pa.nulls(n * m, type=f.type)) for f in METRICS_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=METRICS_SCHEMA)


def write_synthetic_sweep(
    root: Path, n_runs: int = 1000, n_evals: int = 2000, eval_every: int = 50, seed: int = 0
) -> Path:
    """A sweep folder with `n_runs` x `n_evals` metric rows in parts of 100 runs."""
    runs = synthetic_runs(n_runs, seed)
    steps = np.arange(n_evals, dtype=np.int64) * eval_every
    for start in range(0, n_runs, 100):
        write_part(root / "metrics", _metrics_part(runs[start : start + 100], steps, seed + start))
    budget = int(steps[-1])
    run_rows = [
        {k: v for k, v in r.items() if k != "grok"}
        | {"status": "completed" if r["grok"] < budget else "censored", "steps_run": budget}
        for r in runs
    ]
    write_part(root / "runs", to_table(run_rows, RUNS_SCHEMA))
    return root


def main() -> None:
    """Generate, then time read + per-run summary + group summary."""
    from sweepgrok.analysis import comparisons, stats

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--evals", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = write_synthetic_sweep(Path(tmp) / "synthetic", args.runs, args.evals)
        t1 = time.perf_counter()
        metrics, runs = stats.read_sweeps(root)
        t2 = time.perf_counter()
        summary = stats.run_summary(metrics, runs)
        t3 = time.perf_counter()
        # As `sweepgrok analyze --baseline` groups: by the varying keys (by=None).
        groups = comparisons.analysis_table(summary, None, "model.norm=none")
        t4 = time.perf_counter()
    rows = len(metrics)
    print(f"synthetic sweep: {args.runs} runs x {args.evals} evals = {rows:,} metric rows")
    print(f"  generate + write  {t1 - t0:7.2f} s")
    print(f"  read (dedupe)     {t2 - t1:7.2f} s  {rows / (t2 - t1):12,.0f} rows/s")
    print(f"  per-run summary   {t3 - t2:7.2f} s  {rows / (t3 - t2):12,.0f} rows/s")
    print(f"  group summary     {t4 - t3:7.2f} s  ({len(groups)} groups, with comparisons)")
    total = t4 - t1
    print(f"  analysis total    {total:7.2f} s  {rows / total:12,.0f} rows/s")


if __name__ == "__main__":
    main()
