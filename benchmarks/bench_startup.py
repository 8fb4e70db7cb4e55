"""Start-up: how long a command takes before its first training step, and where it goes.

Run: ``python -m benchmarks.bench_startup [--quick] [--repeats 3] [--root DIR ...]``.

Each command runs as a user types it (``python -m sweepgrok ...`` in a fresh process, in a
scratch folder), and is timed in wall clock and in CPU time (the process and its children:
the trustworthy one on a contended machine):

- ``help``: ``sweepgrok --help``, the command line's own imports (Typer, the config models);
- ``import torch``: the floor under any command that trains;
- ``train``: ``sweepgrok train`` of a 1-step tiny trial, start to exit;
- ``launch``: ``sweepgrok launch`` of a 1-trial grid of that trial, with its phases read
  from the sweep folder as it appears (polled every 20 ms): the driver's heartbeat
  (``driver.json``: the command's imports done, Ray not started), Tune's folder (``tune/``:
  Ray started, the fit begun), the heartbeat's first started trial (when the driver hears of
  it: for a 1-step trial, about when it ended), the trial's run row, the exit (Ray shut
  down). Its CPU time counts the driver only: Ray's processes are not its children.

Several ``--root`` checkouts (an earlier commit's copy beside this one) are timed side by side,
round-robin, ``--repeats`` rounds; medians are printed per root. Run it on a quiet machine for
absolute numbers; on a busy one compare roots in one run and read the CPU times.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TRIAL = {
    "task": {"name": "add", "p": 13, "train_fraction": 0.6},
    "model": {"d_model": 16, "n_heads": 2, "d_mlp": 32},
    "train": {"max_steps": 1, "eval_every": 1, "early_evals": False, "device": "cpu"},
    "geometry": {"sample": 64},
}
"""A 1-step tiny trial: nearly all of a command's time is start-up."""
POLL_S = 0.02
LAUNCH_PHASES = ("heartbeat", "ray up", "trial started", "trial ended", "exit")


def children_cpu() -> float:
    """CPU seconds (user + system) of the children this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def env_for(root: Path) -> dict[str, str]:
    """The environment that runs `root`'s sweepgrok, quiet Ray, no usage stats."""
    return {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONHASHSEED": "0"}


def timed(cmd: list[str], root: Path, cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one command, which must succeed."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env_for(root), capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    return wall, cpu


def sweepgrok(*args: str) -> list[str]:
    return [sys.executable, "-m", "sweepgrok", *args]


def heartbeat_running(sweep: Path) -> bool:
    """The driver's heartbeat counts a started trial (running, or already done)."""
    try:
        trials = json.loads((sweep / "driver.json").read_text())["trials"]
    except (OSError, ValueError, KeyError):
        return False
    return trials.get("running", 0) + trials.get("done", 0) > 0


def launch_phases(root: Path, work: Path, grid: Path) -> dict[str, float]:
    """Seconds from the start of `sweepgrok launch` to each of LAUNCH_PHASES, and its CPU."""
    sweep = work / "st" / "startup"
    seen: dict[str, Callable[[], bool]] = {
        "heartbeat": lambda: (sweep / "driver.json").exists(),
        "ray up": lambda: (sweep / "tune").exists(),
        "trial started": lambda: heartbeat_running(sweep),
        "trial ended": lambda: any((sweep / "runs").glob("part-*.parquet")),
    }
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.Popen(sweepgrok("launch", str(grid), "--storage", "st"),
                            cwd=work, env=env_for(root), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    at: dict[str, float] = {}
    while proc.poll() is None:
        for name, reached in seen.items():
            if name not in at and reached():
                at[name] = time.perf_counter() - t0
        time.sleep(POLL_S)
    at["exit"] = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"launch failed ({proc.returncode}):\n{err}")
    at["cpu"] = children_cpu() - cpu0
    return at


def one_round(root: Path, work: Path, quick: bool) -> dict[str, float]:
    """Every measurement once for one checkout."""
    trial = work / "one.yaml"
    grid = work / "grid.yaml"
    out: dict[str, float] = {}
    out["help wall"], out["help cpu"] = timed(sweepgrok("--help"), root, work)
    out["torch wall"], out["torch cpu"] = timed([sys.executable, "-c", "import torch"], root, work)
    args = sweepgrok("train", str(trial), "--out", str(work / "t"), "--quiet")
    out["train wall"], out["train cpu"] = timed(args, root, work)
    if not quick:
        for name, seconds in launch_phases(root, work, grid).items():
            out[f"launch {name}"] = seconds
    return out


def write_inputs(work: Path) -> None:
    (work / "one.yaml").write_text(yaml.safe_dump(TRIAL))
    grid = {"name": "startup", "base": TRIAL, "resources": {"cpu": 1}}
    (work / "grid.yaml").write_text(yaml.safe_dump(grid))


def report(root: Path, rounds: list[dict[str, float]]) -> None:
    """Medians of the rounds of one checkout."""
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(f"  {root}  ({len(rounds)} rounds, medians; wall s / CPU s)")
    for name in ("help", "torch", "train"):
        print(f"    {name:<16} {med[f'{name} wall']:6.2f} / {med[f'{name} cpu']:6.2f}")
    if "launch exit" in med:
        phases = "  ".join(f"{p} {med[f'launch {p}']:.2f}" for p in LAUNCH_PHASES
                           if f"launch {p}" in med)
        print(f"    launch           {phases}  (s from the start; driver CPU "
              f"{med['launch cpu']:.2f})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="no launch (Ray), one round")
    ap.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--root", type=Path, nargs="+", default=[HERE.parent],
                    help="sweepgrok checkouts to time side by side (default: this one)")
    args = ap.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    results: dict[Path, list[dict[str, float]]] = {root: [] for root in args.root}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for i in range(repeats):
            for root in args.root:  # round-robin: the machine's load hits every root alike
                work = Path(tmp) / f"r{i}-{len(results[root])}-{abs(hash(root))}"
                work.mkdir()
                write_inputs(work)
                results[root].append(one_round(root.resolve(), work, args.quick))
    print(f"bench_startup: a 1-step tiny trial, {repeats} round(s), load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for root, rounds in results.items():
        report(root, rounds)


if __name__ == "__main__":
    main()
