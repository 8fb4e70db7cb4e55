"""Write a sweep folder with THIS version of sweepgrok, interrupted mid-sweep (run once per
release; the folder is committed and never rewritten: later versions must read and resume it).

    .venv/bin/python tests/data/make_fixture_sweep.py

A real `sweepgrok launch` of a 3-trial grid (one trial at a time) receives SIGINT, as Ctrl-C
sends it, once the first trial has ended and the second has saved a checkpoint: the folder then
holds one finished trial, one trial to continue from its checkpoint and one never started.
Written to tests/data/fixture_sweep_v<version>/ (the sweep folder itself), then the same grid
is run uninterrupted in a scratch folder and its rows are kept beside it as expected.json: the
rows a resume must produce. Ray's process-wide logs are not part of the fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")
BASE = {
    "task": {"name": "add", "p": 11, "train_fraction": 0.6},
    "model": {"d_model": 8, "n_heads": 2, "d_mlp": 16},
    "geometry": {"sample": 32},
    "train": {
        "max_steps": 300,
        "eval_every": 20,
        "early_evals": False,
        "stop_after_grok": False,
        "device": "cpu",
        "threads": 1,
    },
}
CHECKPOINT_EVERY = 5  # evaluations: checkpoints at steps 100 and 200 (none at the last)


def grid(name: str) -> dict[str, Any]:
    """The grid: three seeds, the base inline (the folder's copy must not need another file)."""
    return {
        "name": name,
        "base": BASE,
        "seeds": [1, 2, 3],
        "max_concurrent": 1,
        "checkpoint_every": CHECKPOINT_EVERY,
        "resources": {"cpu": 1},
    }


def snapshot(sweep: Path) -> dict[str, str]:
    """{trial_id: status} in Tune's latest experiment snapshot."""
    files = sorted((sweep / "tune").glob("experiment_state-*.json"))
    try:
        trial_data = json.loads(files[-1].read_text())["trial_data"]
    except (IndexError, OSError, ValueError):
        return {}
    return {t["trial_id"]: t["status"] for t in (json.loads(s) for s, _ in trial_data)}


def ready(sweep: Path) -> bool:
    """One trial TERMINATED in Tune's snapshot and the next one has a checkpoint on disk."""
    done = [t for t, s in snapshot(sweep).items() if s == "TERMINATED"]
    checkpoints = list((sweep / "tune").glob("*/checkpoint_*"))
    return len(done) == 1 and any(done[0] not in str(c) for c in checkpoints)


def launch(grid_file: Path, storage: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = [SWEEPGROK, "launch", str(grid_file), "--storage", str(storage)]
    return subprocess.Popen(cmd, env=env, start_new_session=True)


def interrupted(storage: Path, name: str, env: dict[str, str]) -> Path:
    storage.mkdir(parents=True)
    grid_file = storage / "grid.yaml"
    grid_file.write_text(yaml.safe_dump(grid(name), sort_keys=False))
    proc = launch(grid_file, storage, env)
    sweep = storage / name
    deadline = time.monotonic() + 600
    while not ready(sweep):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the sweep ended before it could be interrupted: run it again")
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the process group
    proc.wait(timeout=300)
    return sweep


def plain(value: Any) -> Any:
    """A JSON value that reads back exactly (Python floats print their shortest exact repr)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def rows(sweep: Path) -> dict[str, Any]:
    """{seed: {"run": outcome, "metrics": [every metrics column but run_id and wall_time]}}."""
    from sweepgrok.store.sink import read_metrics, read_runs

    runs = read_runs(sweep).sort_values("train.seed")
    metrics = read_metrics(sweep)
    out: dict[str, Any] = {}
    for _, run in runs.iterrows():
        m = metrics[metrics["run_id"] == run["run_id"]].sort_values("step")
        m = m.drop(columns=["run_id", "wall_time"])
        out[str(run["train.seed"])] = {
            "run": {k: plain(run[k]) for k in ("status", "fit_step", "grok_step", "steps_run")},
            "metrics": [{k: plain(v) for k, v in r.items()} for r in m.to_dict("records")],
        }
    return out


def main() -> None:
    name = f"fixture_sweep_v{version('sweepgrok')}"
    target = HERE / name
    if target.exists():
        raise SystemExit(f"{target} exists: a fixture is written once per version")
    scratch = Path(tempfile.mkdtemp(prefix="fixture-"))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    sweep = interrupted(scratch / "a", name, env)
    shutil.copytree(sweep, target)
    full = scratch / "b"
    (full / "grid.yaml").parent.mkdir(parents=True)
    (full / "grid.yaml").write_text(yaml.safe_dump(grid(name), sort_keys=False))
    subprocess.run(
        [SWEEPGROK, "launch", str(full / "grid.yaml"), "--storage", str(full)], env=env, check=True
    )
    expected = rows(full / name)
    (HERE / f"{name}.expected.json").write_text(json.dumps(expected, indent=1, default=str))
    shutil.rmtree(scratch)
    print(f"wrote {target} and {name}.expected.json")


if __name__ == "__main__":
    main()
