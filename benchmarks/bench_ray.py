"""Ray overhead: a grid of trivial trials through ``sweepgrok.tune`` vs the same trials in a loop.

Run: ``python -m benchmarks.bench_ray [--quick] [--trials 8] [--cpus 2]``.

Both sides run the same expanded grid (``sweepgrok.config.grid_file.load_grid`` of a generated grid
file): tiny 1-layer Transformers on Z_11, a few dozen steps each, so almost all of the time is
overhead. ``ray`` is ``sweepgrok.tune.grid.launch_grid`` (embedded Ray started and shut
down, one CPU per trial, ``--cpus`` trials at once, rows to Parquet through the driver
callback); ``loop`` calls ``sweepgrok.train.trainer.train`` on every trial in turn with one thread,
writing the same Parquet through ``ParquetSink``. Printed: the ratio ray / loop (> 1 means Ray
costs more than it parallelizes away at this trial size), Ray's fixed cost (start-up and
shut-down, timed as a 1-trial grid) and the marginal cost per trial; then the same grid with a
fresh worker process per trial (Tune's reuse_actors off; sweepgrok reuses them, see
sweepgrok.tune.grid.REUSE_ACTORS), side by side: what reusing workers saves.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from sweepgrok.config.grid_file import GridSpec, load_grid
from sweepgrok.config.trial import from_flat
from sweepgrok.store.sink import ParquetSink
from sweepgrok.train.process import configure_process
from sweepgrok.train.trainer import train

STEPS = 40
BASE = {
    "task": {"name": "add", "p": 11, "train_fraction": 0.6},
    "model": {"d_model": 16, "n_heads": 2, "d_mlp": 32},
    "train": {"max_steps": STEPS, "eval_every": 10, "early_evals": False},
    "geometry": {"sample": 32, "knn_k": 3},
}


def grid_file(folder: Path, n: int, cpus: int) -> Path:
    """A grid of n trivial trials (n seeds), one CPU each, `cpus` at once."""
    doc = {"name": f"bench_ray_{n}", "base": BASE, "seeds": list(range(n)),
           "resources": {"cpu": 1}, "max_concurrent": cpus, "storage": str(folder)}
    path = folder / f"grid_{n}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run_ray(spec: GridSpec, sweep_dir: Path, cpus: int, reuse: bool = True) -> float:
    """Wall time of the grid through launch_grid; `reuse` false: a fresh worker per trial."""
    from sweepgrok.tune import grid  # imports ray

    chosen = grid.REUSE_ACTORS
    grid.REUSE_ACTORS = reuse
    try:
        t0 = time.perf_counter()
        outcome = grid.launch_grid(spec, sweep_dir, num_cpus=cpus, live=False)
        wall = time.perf_counter() - t0
    finally:
        grid.REUSE_ACTORS = chosen
    if outcome.terminated != len(spec.trials):
        raise RuntimeError(f"ray grid did not finish: {outcome}")
    return wall


def run_loop(spec: GridSpec, sweep_dir: Path) -> float:
    t0 = time.perf_counter()
    sink = ParquetSink(sweep_dir)
    for trial in spec.trials:
        cfg = from_flat(trial.flat)
        configure_process(cfg.train, default_threads=1)  # one thread, as a 1-CPU Ray trial
        train(cfg, sink, sweep=spec.settings.name)
    sink.flush()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer trials, one repeat")
    ap.add_argument("--trials", type=int, default=None, help="trials in the grid (default 8)")
    ap.add_argument("--cpus", type=int, default=2, help="Ray CPUs (= trials at once)")
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args(argv)
    n = args.trials or (4 if args.quick else 8)
    repeats = args.repeats or (1 if args.quick else 2)
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as tmp:
        root = Path(tmp)
        big, one = load_grid(grid_file(root, n, args.cpus)), load_grid(grid_file(root, 1, 1))
        ray_t, loop_t, fixed, fresh_t = [], [], [], []
        for rep in range(repeats):
            loop_t.append(run_loop(big, root / f"loop_{rep}"))
            ray_t.append(run_ray(big, root / f"ray_{rep}", args.cpus))
            fresh_t.append(run_ray(big, root / f"fresh_{rep}", args.cpus, reuse=False))
            fixed.append(run_ray(one, root / f"ray1_{rep}", 1))
            loop_one = run_loop(one, root / f"loop1_{rep}")
            fixed[-1] -= loop_one
    r, lp, f, fr = (statistics.median(x) for x in (ray_t, loop_t, fixed, fresh_t))
    per_trial_loop = lp / n
    marginal = (r - f) * min(args.cpus, n) / n - per_trial_loop
    print(f"bench_ray: {n} trivial trials ({STEPS} steps, Z_11), "
          f"ray with {args.cpus} CPU(s) vs a 1-thread loop, median of {repeats}")
    print(f"  ray / loop time            {r / lp:>7.2f}x   (ray {r:.1f} s, loop {lp:.1f} s)")
    print(f"  ray fixed cost             {f:>7.1f} s   (1-trial grid minus 1 trial in a loop)")
    print(f"  ray marginal cost / trial  {marginal:>7.2f} s   (per trial slot, beyond the work; "
          f"a trial's work in the loop: {per_trial_loop:.2f} s)")
    saved = (fr - r) * min(args.cpus, n) / n
    print(f"  fresh / reused workers     {fr / r:>7.2f}x   (fresh {fr:.1f} s: reusing saves "
          f"{saved:.2f} s per trial slot)")


if __name__ == "__main__":
    main()
