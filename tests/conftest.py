"""Shared test fixtures: quiet Ray, tiny grid files, polled waits (wait_until: never a fixed
sleep hoping a state is reached), and cleanup of the Ray processes a test started (found by a
tag in their environment, stopped by PID; never `ray stop`, never a name match: other clusters
on this machine are not ours)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

TAG_ENV = "SWEEPGROK_TEST_TAG"

# ---- the tiny trial: the one config builder every test that trains starts from ---------------

TINY: dict[str, Any] = {
    "task.name": "add",
    "task.p": 13,
    "task.train_fraction": 0.6,
    "model.d_model": 16,
    "model.n_heads": 2,
    "model.d_mlp": 32,
    "geometry.sample": 64,
    "train.max_steps": 200,
    "train.eval_every": 20,
    "train.early_evals": False,
    "train.device": "cpu",
}
"""A trial of well under a second of training (it will not grok: that is not the point).
Tests take it through tiny_config, never by hand, so that each one states how it differs."""


def tiny_config(
    overrides: Mapping[str, Any] | None = None,
    *,
    defaults: Iterable[str] = (),
    keys: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The tiny trial as a flat dict ({"task.p": 13, ...}) with a test's differences:
    `overrides` set keys, `defaults` leave keys of TINY at the Config default (a test written
    against the defaults says which), `keys` keeps only those keys (the sizes alone, to go over
    another config). A flat dict is what from_flat, a golden reference and `--set` take;
    tiny_tree nests it for a YAML file."""
    flat = dict(TINY)
    for key in defaults:
        if key not in flat:  # a typo would silently keep the tiny value
            raise KeyError(f"{key} is not a key of the tiny trial")
        del flat[key]
    flat.update(overrides or {})
    if keys is not None:
        flat = {key: flat[key] for key in keys}
    return flat


GROK_APART = {
    "task.p": 23, "task.train_fraction": 0.8, "model.d_model": 32, "model.d_mlp": 64,
    "model.norm": "sphere", "optim.weight_decay": 0.0, "optim.lr": 1e-2, "train.max_steps": 160,
    "train.eval_every": 10, "train.grok_threshold": 0.6, "train.threads": 1,
    "geometry.sample": 32, "geometry.knn_k": 3, "train.seeds": [0, 1, 2, 3],
}
"""Overrides of the tiny trial (with train.early_evals at its default) for four seeds in
lockstep of which some grok (test acc >= 0.6) around step 130 and others not before 160:
members end at different evaluations (tests/train/test_trainer_seeds.py, test_graphstep.py).
Equal rows to float tolerance is a CPU fact: on CUDA the batched and the separate runs'
products are different cuBLAS kernels (bmm, mm) that round differently, and this lr-1e-2 run
amplifies that to ~1% in train accuracy by step 80 (seen on an H200); train.device stays cpu."""


def tiny_tree(
    overrides: Mapping[str, Any] | None = None, *, defaults: Iterable[str] = ()
) -> dict[str, Any]:
    """tiny_config as a YAML tree ({"task": {"p": 13}, ...}): a trial file, a grid's base."""
    from sweepgrok.config.trial import nest

    return nest(tiny_config(overrides, defaults=defaults))


def set_items(flat: Mapping[str, Any]) -> list[str]:
    """A flat config as `--set` values, key=value ("train.early_evals=False")."""
    return [f"{key}={value}" for key, value in flat.items()]


def set_flags(flat: Mapping[str, Any]) -> list[str]:
    """A flat config as command-line flags: --set key=value for each key."""
    return [arg for item in set_items(flat) for arg in ("--set", item)]


def write_grid(path: Path, name: str, **doc: Any) -> Path:
    """A grid file with the tiny trial as its base (overridable) and the given top-level keys."""
    full = {"name": name, "base": tiny_tree(), **doc}
    path.write_text(yaml.safe_dump(full, sort_keys=False))
    return path


SEARCH_BASE = {"geomdr": {"enabled": True}, "train": {"max_steps": 1000, "eval_every": 50}}
SEARCH_SPACE = {
    "geomdr.lambda_max": {"loguniform": [0.01, 1.0]}, "geomdr.start_step": {"int": [0, 500]},
}
"""The base and space of write_search's file (a GeomDR search; nothing of it trains)."""


def write_search(folder: Path, search: dict[str, Any] | None = None, **top: Any) -> Path:
    """folder/search.yaml: search "s" over SEARCH_SPACE from SEARCH_BASE, with `search` keys
    over its search section and `top` top-level keys."""
    doc = {"name": "s", "base": SEARCH_BASE, "search": {"space": SEARCH_SPACE, **(search or {})},
           **top}
    path = folder / "search.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def poll(predicate: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    """predicate()'s first truthy value within `timeout` seconds, else its last (falsy) one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll until predicate() is truthy and return that value; fail naming `what` on timeout.

    The predicate may itself fail (e.g. assert that a process it waits on is still alive)."""
    value = poll(predicate, timeout)
    if not value:
        pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
    return value


def tagged_pids(tag: str) -> list[int]:
    """PIDs of live processes whose environment carries TAG_ENV=tag (ours and descendants)."""
    needle = f"{TAG_ENV}={tag}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def stop_pids(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM, wait, then SIGKILL the given PIDs (each one ours, by construction)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        poll(lambda pids=pids: not any(_alive(p) for p in pids), grace)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def ray_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Environment for Ray in tests: a short private temp dir (unix socket paths are limited
    to ~107 bytes), no usage stats, frequent experiment snapshots, and a tag so every process
    started under it can be found and stopped afterwards."""
    tmp = tempfile.mkdtemp(prefix="sgray-", dir="/tmp")
    tag = uuid.uuid4().hex
    env = {
        "RAY_TMPDIR": tmp,
        "RAY_USAGE_STATS_ENABLED": "0",
        "TUNE_GLOBAL_CHECKPOINT_S": "1",
        TAG_ENV: tag,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield {**os.environ, **env}
    try:
        import ray

        ray.shutdown()
    except ImportError:
        pass
    stop_pids(tagged_pids(tag))
    shutil.rmtree(tmp, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first, those with the longest timeout first (a timeout is about 3x the
    measured time), the rest in file order. `make test` runs both tiers in one session on 4
    xdist workers (--dist loadgroup: each worker takes the next test as it frees up): the slow
    Ray tests, which mostly wait on Ray, start at once and run beside one another, and the
    fast ones fill the cores behind them instead of waiting for the longest to end."""
    default = float(config.getini("timeout") or 0)

    def order(item: pytest.Item) -> tuple[int, float]:
        if item.get_closest_marker("slow") is None:
            return (1, 0.0)
        mark = item.get_closest_marker("timeout")
        return (0, -float(mark.args[0] if mark and mark.args else default))

    items.sort(key=order)  # stable: file order within each key


@pytest.fixture(autouse=True, scope="session")
def process_settings() -> None:
    """The test process is an entry point like `sweepgrok train`: it sets the default
    process-wide settings (deterministic kernels, malloc) once, before any trainer runs."""
    from sweepgrok.config.trial import TrainConfig
    from sweepgrok.train.process import configure_process

    configure_process(TrainConfig())


def one_line_error(output: str) -> str:
    """The one error line a command prints (``error: <where>: <message>``); fails on anything
    else (a traceback, several lines)."""
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


def assert_each_refuses(runner: Any, app: Any, commands: list[list[str]], path: Path,
                        words: list[str]) -> None:
    """Every command exits 2 with one error line that names `path` and holds every word."""
    for command in commands:
        res = runner.invoke(app, command)
        assert res.exit_code == 2, res.output
        line = one_line_error(res.output)
        assert str(path) in line and all(w in line for w in words), line


def checkpoint_without(cfg: Any, key: str, folder: Path, step: int) -> Any:
    """Train `cfg` (sweepgrok.train.trainer.train), save its checkpoint at `step` into `folder`,
    then
    delete `key` from the saved state (a checkpoint of an older version, or a damaged one);
    returns the deleted value."""
    import torch

    from sweepgrok.store.sink import ListSink
    from sweepgrok.train.trainer import train

    def save_at_step(report: Any) -> None:
        if report.step == step:
            report.save_checkpoint(folder)

    train(cfg, ListSink(), on_eval=save_at_step)
    state = torch.load(folder / "trainer.pt", weights_only=True)
    removed = state.pop(key)
    torch.save(state, folder / "trainer.pt")
    return removed


# ---- shared by several test modules ------------------------------------------------------------


# ---- sweeps written by hand, and what a Ray sweep must have written ----------------------------

EVAL = 100
N_EVALS = 11  # steps 0..1000


def _curve(grok_at: int | None) -> list[float]:
    return [1.0 if grok_at is not None and i * EVAL >= grok_at else 0.1 for i in range(N_EVALS)]


def write_sweep(
    root: Path, groks: dict[str, list[int | None]], seed0: int = 0, grok_threshold: float = 0.99
) -> Path:
    """Runs with complete config rows: model.norm -> grok steps per seed (None = censored)."""
    from sweepgrok.config.trial import Config, flatten, update
    from sweepgrok.store.sink import ParquetSink

    sink = ParquetSink(root)
    for norm, steps in groks.items():
        for i, grok in enumerate(steps):
            overrides = {"model.norm": norm, "train.seed": seed0 + i}
            cfg = update(Config(), {**overrides, "train.grok_threshold": grok_threshold})
            run_id = f"{root.name}-{norm}-{i}"
            curve = _curve(grok)
            sink.write_metrics(
                [
                    {
                        "run_id": run_id,
                        "step": k * EVAL,
                        "train_acc": 1.0,
                        "test_acc": acc,
                        "deff": 20.0 - k,
                        "logit_norm": 1.0 + k,
                        "collapse_share": k / 10,
                    }
                    for k, acc in enumerate(curve)
                ]
            )
            status = "censored" if grok is None else "completed"
            steps_run = (N_EVALS - 1) * EVAL
            sink.write_run(
                {**flatten(cfg), "run_id": run_id, "status": status, "steps_run": steps_run}
            )
    return root


GROKS: dict[str, list[int | None]] = {"none": [800, 900, None], "sphere": [200, 300, 300]}


def raw_rows(sweep_dir: Path, kind: str) -> Any:
    """Every row written, duplicates included (what the readers deduplicate)."""
    import pyarrow.dataset as ds

    from sweepgrok.store.sink import METRICS_SCHEMA, RUNS_SCHEMA

    schema = {"metrics": METRICS_SCHEMA, "runs": RUNS_SCHEMA}[kind]
    files = [str(p) for p in sorted((sweep_dir / kind).glob("part-*.parquet"))]
    return ds.dataset(files, schema=schema, format="parquet").to_table().to_pandas()


PLAIN_KEYS = {"runs": ["run_id"], "metrics": ["run_id", "step"],
              "geometry": ["run_id", "step", "layer"]}
"""Each part folder's key: what a plain Parquet reader must find once per row."""


def assert_plain_readers_read_one_row_per_key(sweep_dir: Path) -> None:
    """pandas, DuckDB and Polars, as docs/outputs.md tells users to call them, read every
    part folder of `sweep_dir` raw (no dedupe) with each key once, and the rows the readers
    of sweepgrok read."""
    import duckdb
    import pandas as pd
    import polars as pl

    from sweepgrok.store.sink import read_table

    for kind, keys in PLAIN_KEYS.items():
        if not (sweep_dir / kind).exists():
            continue
        ours = read_table(sweep_dir, kind).to_pandas()
        want = sorted(ours[keys].itertuples(index=False, name=None))
        query = f"SELECT * FROM read_parquet('{sweep_dir}/{kind}/*.parquet')"
        frames = {
            "pandas": pd.read_parquet(sweep_dir / kind),
            "duckdb": duckdb.sql(query).df(),
            "polars": pl.read_parquet(f"{sweep_dir}/{kind}/*.parquet").to_pandas(),
        }
        for reader, frame in frames.items():
            assert sorted(frame[keys].itertuples(index=False, name=None)) == want, (reader, kind)
            if kind == "runs":  # each run's last-written row: its final status
                statuses = dict(zip(frame["run_id"], frame["status"], strict=True))
                assert statuses == dict(zip(ours["run_id"], ours["status"], strict=True)), reader


def assert_exactly_once(sweep_dir: Path, n_runs: int) -> Any:
    """n_runs run rows with a final status; each run's metrics cover its schedule, once."""
    from sweepgrok.store.sink import read_metrics, read_runs
    from sweepgrok.train.trainer import eval_steps

    runs = read_runs(sweep_dir)
    assert len(runs) == n_runs, runs[["run_id", "status"]]
    assert set(runs["status"]) <= {"grokked", "completed", "censored"}, runs["status"]
    assert runs["trial_id"].notna().all() and runs["node_id"].notna().all()
    metrics = read_metrics(sweep_dir)
    assert not metrics.duplicated(["run_id", "step"]).any()
    for _, run in runs.iterrows():
        steps = metrics.loc[metrics["run_id"] == run["run_id"], "step"].tolist()
        schedule = eval_steps(int(run["train.max_steps"]), int(run["train.eval_every"]), False)
        assert steps == [s for s in schedule if s <= run["steps_run"]], (run["run_id"], steps)
    return runs


# ---- a sweep folder caught mid-sweep (tests/analysis/test_sweepstatus.py, cli/test_status.py)


def run_row(trial: str, norm: str, status: str, grok: int | None, steps: int) -> dict[str, Any]:
    """A run row of trial `trial` of the mid-sweep folder (sweep "st", one seed per trial)."""
    return {
        "run_id": f"st-{trial}", "trial_id": trial, "sweep": "st", "status": status,
        "grok_step": grok, "grok_step_99": grok, "grok_step_95": grok, "steps_run": steps,
        "censored": grok is None, "model.norm": norm, "train.seed": 1, "train.max_steps": 200,
        "train.grok_threshold": 0.99,
    }


def tune_entry(trial: str, status: str, seconds: float | None = None) -> list[str]:
    """One trial of Tune's experiment snapshot, in its layout: [trial JSON, run-metadata JSON]."""
    import json

    meta = {"trial_id": trial, "status": status, "config": {"cfg": {"train.seeds": None}}}
    run = {"last_result": {} if seconds is None else {"time_total_s": seconds}}
    return [json.dumps(meta), json.dumps(run)]


def write_midsweep(d: Path) -> Path:
    """A grid of 6 trials caught mid-sweep in folder `d` (named "st"): t0 done, t1 done (its
    rows are newer than Tune's snapshot), t2 failed, t3 running, t4 pending in Tune, t5 not
    started."""
    import json

    from sweepgrok.store.sink import RUNS_SCHEMA, to_table, write_part

    d.mkdir()
    write_grid(d / "sweep.yaml", "st", grid={"model.norm": ["none", "sphere"]}, seeds=[1, 2, 3])
    rows = [
        run_row("t0", "none", "grokked", 100, 100),
        run_row("t1", "none", "censored", None, 200),
        run_row("t2", "sphere", "failed", None, 40),
    ]
    for row in rows:
        write_part(d / "runs", to_table([row], RUNS_SCHEMA))
    (d / "tune").mkdir()
    snapshot = {"trial_data": [
        tune_entry("t0", "TERMINATED", 100.0),
        tune_entry("t1", "RUNNING", 60.0),
        tune_entry("t2", "ERROR", 30.0),
        tune_entry("t3", "RUNNING", 10.0),
        tune_entry("t4", "PENDING"),
    ]}
    (d / "tune" / "experiment_state-2026-01-01_00-00-00.json").write_text(json.dumps(snapshot))
    return d


# --- hand-built point clouds (tests/train/test_geometry.py, test_geomdr.py) --------------------


def torch_gen(seed: int = 0) -> torch.Generator:
    """A CPU generator seeded with `seed`."""
    return torch.Generator().manual_seed(seed)


def random_rotation(d: int, seed: int = 0) -> torch.Tensor:
    """A seeded random d x d orthogonal matrix (float64)."""
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch_gen(seed), dtype=torch.float64))
    return q


def diag_cov_data(mus: list[float], seed: int = 0) -> torch.Tensor:
    """8 x d data whose covariance is exactly R diag(mus) R^T for a random rotation R.

    Columns of an 8 x 8 Sylvester-Hadamard matrix other than the all-ones one are zero-mean,
    mutually orthogonal and have squared norm 8, so column j scaled by sqrt(7 mu_j / 8) has
    variance mu_j (divisor N - 1 = 7) and no covariance with the others.
    """
    h = torch.tensor([[1.0]], dtype=torch.float64)
    for _ in range(3):
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    cols = h[:, 1 : 1 + len(mus)] * torch.tensor(mus, dtype=torch.float64).mul(7 / 8).sqrt()
    return cols @ random_rotation(len(mus), seed).T
