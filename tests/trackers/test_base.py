"""--tracker mlflow / wandb: each run mirrored once, equal to the Parquet record; a failing
tracker only warns; a missing extra exits 2 with its install command.

MLflow is read back from a local SQLite store (MLflow 3.18 refuses its file store by default);
W&B runs offline and its local run file is read back with the record format W&B writes.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import one_line_error, set_items, tiny_config, write_grid
from typer.testing import CliRunner

from sweepgrok.cli import app
from sweepgrok.store.sink import ListSink, read_table
from sweepgrok.store.sweepdir import make_sweep_folder
from sweepgrok.trackers import MissingExtra, TrackerSpec
from sweepgrok.trackers.base import (
    CONFIG_KEYS,
    METRIC_KEYS,
    SUMMARY_KEYS,
    load_tracker,
    tracked,
)

ROOT = Path(__file__).parents[2]
runner = CliRunner()
TINY = set_items(tiny_config({"train.max_steps": 60}))
"""The tiny trial as --set overrides, 60 steps: 4 evaluations (0, 20, 40, 60)."""


def train(tmp_path: Path, *trackers: str, seeds: str = "[1, 2]") -> Any:
    """`sweepgrok train` of the tiny trial (two packed seeds: two runs) into tmp_path/o."""
    args = ["train", str(ROOT / "search_spaces/trials/trial_quick.yaml"), "--quiet",
            "--out", str(tmp_path / "o")]
    for item in [*TINY, f"train.seeds={seeds}"]:
        args += ["--set", item]
    for tracker in trackers:
        args += ["--tracker", tracker]
    return runner.invoke(app, args)


def record(sweep_dir: Path) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """runs/ by run id, and each run's metrics/ rows in step order (as the readers give them)."""
    runs = {r["run_id"]: r for r in read_table(sweep_dir, "runs").to_pylist()}
    metrics: dict[str, list[dict]] = {}
    for row in read_table(sweep_dir, "metrics").to_pylist():
        metrics.setdefault(row["run_id"], []).append(row)
    return runs, metrics


def series(rows: list[dict], key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in rows if r[key] is not None]


@pytest.fixture
def tracker_warnings() -> Iterator[list[logging.LogRecord]]:
    """The warnings of sweepgrok.trackers (collected here: the CLI may stop propagation)."""
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("sweepgrok.trackers")
    logger.addHandler(handler)
    yield seen
    logger.removeHandler(handler)


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # what mlflow.search_runs reads back
    monkeypatch.chdir(tmp_path)  # a SQLite store keeps artifacts in ./mlruns
    return uri


# ---- the option --------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["neptune", "mlflow=", "wandb:proj"])
def test_an_unknown_tracker_exits_2_naming_the_allowed_values(tmp_path: Path, value: str) -> None:
    res = train(tmp_path, value)
    assert res.exit_code == 2, res.output
    assert "--tracker" in res.output and "mlflow[=URI], wandb[=PROJECT]" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["mlflow", "wandb"])
def test_a_missing_extra_exits_2_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setitem(sys.modules, kind, None)  # what `import mlflow` does when absent
    res = train(tmp_path, kind)
    assert res.exit_code == 2, res.output
    assert f"pip install 'sweepgrok[{kind}]'" in res.output and "--tracker" in res.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["mlflow", "wandb"])
def test_the_loader_turns_a_failed_import_into_the_install_command(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setitem(sys.modules, kind, None)
    with pytest.raises(MissingExtra, match=rf"pip install 'sweepgrok\[{kind}\]'"):
        load_tracker(TrackerSpec(kind), "sweep", "folder")


def test_the_summary_numbers_are_the_declared_summary_columns_and_delay() -> None:
    # Declared in sweepgrok.store.columns (Column.summary); what expected_summary checks by hand.
    assert set(SUMMARY_KEYS) == {"grok_step", "fit_step", "delay", "censored", "steps_run",
                                 "final_train_acc", "final_test_acc", "peak_test_acc"}


@pytest.mark.parametrize("command", ["launch", "search"])
def test_launch_and_search_hand_the_trackers_to_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    import sweepgrok.tune.grid
    import sweepgrok.tune.search

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def driver(*args: Any, **kw: Any) -> Any:
        seen.update(kw)
        raise Stop

    if command == "launch":
        monkeypatch.setattr(sweepgrok.tune.grid, "launch_grid", driver)
        sweep_file = write_grid(tmp_path / "g.yaml", "g")
    else:
        monkeypatch.setattr(sweepgrok.tune.search, "run_search", driver)
        sweep_file = ROOT / "search_spaces/searches/quick_optuna.yaml"
    res = runner.invoke(app, [command, str(sweep_file), "--storage", str(tmp_path),
                              "--tracker", "mlflow=sqlite:///x.db", "--tracker", "wandb"])
    assert isinstance(res.exception, Stop), res.output
    assert seen["trackers"] == [TrackerSpec("mlflow", "sqlite:///x.db"), TrackerSpec("wandb")]


@pytest.mark.parametrize("target", ["file://{tmp}/mlruns", "{tmp}/mlruns", "mlruns"])
def test_mlflow_file_store_is_refused_before_the_sweep_starts_with_the_sqlite_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    from sweepgrok.trackers.targets import mlflow_version

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    res = train(tmp_path, "mlflow=" + target.format(tmp=tmp_path))
    assert res.exit_code == 2, res.output
    message = one_line_error(res.output)
    assert message.startswith("error: --tracker: mlflow=") and "Traceback" not in res.output
    assert f"MLflow {mlflow_version()} refuses a folder of runs" in message
    assert f"mlflow=sqlite:///{tmp_path}/mlruns.db" in message
    assert not (tmp_path / "o").exists() and not (tmp_path / "mlruns").exists()


def test_the_file_store_check_follows_mlflow_and_its_opt_in(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweepgrok.trackers import TrackerSpecError, targets

    folder = [TrackerSpec("mlflow", "file:///x/mlruns")]
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "/x/mlruns")  # the default target, a folder too
    with pytest.raises(TrackerSpecError, match="MLFLOW_TRACKING_URI=/x/mlruns"):
        targets.check_targets([TrackerSpec("mlflow")])
    targets.check_targets([TrackerSpec("mlflow", "sqlite:///x.db"), TrackerSpec("wandb", "p")])
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's own opt-in
    targets.check_targets(folder)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    monkeypatch.setattr(targets, "mlflow_version", lambda: "3.12.2")  # still had a file store
    targets.check_targets(folder)
    monkeypatch.setattr(targets, "mlflow_version", lambda: "3.13.0rc0")
    with pytest.raises(TrackerSpecError, match=r"sqlite:////x/mlruns\.db"):
        targets.check_targets(folder)


# ---- MLflow ------------------------------------------------------------------------------


def mlflow_runs(sweep: str, **kw: Any) -> Any:
    """The MLflow runs of the sweep's runs (its parent run left out)."""
    import mlflow

    found = mlflow.search_runs(experiment_names=[sweep], **kw)
    return found[found["tags.sweepgrok.parent"].isna()].reset_index(drop=True)


def mlflow_parent(sweep: str) -> Any:
    """The sweep's parent run (exactly one)."""
    import mlflow

    found = mlflow.search_runs(experiment_names=[sweep],
                               filter_string="tags.`sweepgrok.parent` = 'true'")
    assert len(found) == 1, found
    return found.iloc[0]


def expected_summary(run: dict[str, Any]) -> dict[str, float]:
    """A run's numeric summary from its runs/ row, by hand: censored runs have no grok_step."""
    out = {"fit_step": run["fit_step"], "steps_run": run["steps_run"],
           "final_train_acc": run["final_train_acc"], "final_test_acc": run["final_test_acc"],
           "peak_test_acc": run["peak_test_acc"], "censored": 1 if run["grok_step"] is None else 0}
    if run["grok_step"] is not None:
        out |= {"grok_step": run["grok_step"], "delay": run["grok_step"] - run["fit_step"]}
    return {k: float(v) for k, v in out.items() if v is not None}


def assert_mlflow_equals_the_record(
    sweep_dir: Path, sweep: str, skip: tuple[str, ...] = ()
) -> None:
    """One MLflow run per run: params = config, history = metrics/, tags = summary."""
    from mlflow.tracking import MlflowClient

    runs, metrics = record(sweep_dir)
    found = mlflow_runs(sweep)
    assert sorted(found["tags.mlflow.runName"]) == sorted(runs), found["tags.mlflow.runName"]
    client = MlflowClient()
    for _, mrun in found.iterrows():
        run = runs[mrun["tags.mlflow.runName"]]
        assert {k: mrun[f"params.{k}"] for k in CONFIG_KEYS} == {
            k: str(run[k]) for k in CONFIG_KEYS
        }
        assert mrun["tags.status"] == run["status"]
        assert "tags.grok_step" not in mrun  # numbers, not text
        summary = {k: mrun[f"metrics.{k}"] for k in SUMMARY_KEYS
                   if f"metrics.{k}" in mrun and mrun[f"metrics.{k}"] == mrun[f"metrics.{k}"]}
        assert summary == expected_summary(run)
        assert mrun["tags.mlflow.parentRunId"] == mlflow_parent(sweep)["run_id"]
        assert mrun["status"] == "FINISHED"
        for key in (k for k in METRIC_KEYS if k not in skip):
            history = client.get_metric_history(mrun["run_id"], key)
            got = sorted((m.step, m.value) for m in history)
            assert got == series(metrics[run["run_id"]], key), key


def test_mlflow_holds_each_run_as_the_parquet_does(tmp_path: Path, mlflow_uri: str) -> None:
    res = train(tmp_path, f"mlflow={mlflow_uri}")
    assert res.exit_code == 0, res.output
    runs, metrics = record(tmp_path / "o")
    assert len(runs) == 2 and all(len(rows) == 4 for rows in metrics.values())
    assert_mlflow_equals_the_record(tmp_path / "o", "o")
    # The parent run holds analyze's table of the sweep folder, as `sweepgrok analyze` prints it.
    parent = mlflow_parent("o")
    assert (parent["tags.mlflow.runName"], parent["status"]) == ("o", "FINISHED")
    held = mlflow_artifacts(parent["run_id"], tmp_path / "got")
    assert sorted(held) == ["analysis.csv", "analysis.md", "report.html"]  # no sweep file
    assert "<strong>Result</strong>: " in held["report.html"]  # made when train ended
    for fmt in ("csv", "markdown"):
        printed = runner.invoke(app, ["analyze", str(tmp_path / "o"), "--format", fmt])
        assert printed.exit_code == 0, printed.output
        assert held["analysis.csv" if fmt == "csv" else "analysis.md"] == printed.stdout


def mlflow_artifacts(run_id: str, into: Path) -> dict[str, str]:
    """Every artifact of an MLflow run: name -> text."""
    from mlflow.tracking import MlflowClient

    folder = Path(MlflowClient().download_artifacts(run_id, "", str(into)))
    return {p.name: p.read_text() for p in folder.iterdir()}


def test_mlflow_sorts_runs_by_grok_step_and_a_censored_run_has_none(
    tmp_path: Path, mlflow_uri: str
) -> None:
    sweep_dir = tmp_path / "srt"
    make_sweep_folder(sweep_dir)
    (sweep_dir / "sweep.yaml").write_text("name: srt\n")  # the copy a launch keeps
    sink = tracked(ListSink(), [TrackerSpec("mlflow", mlflow_uri)], "srt", sweep_dir)
    ends = {"a": (100, 300), "b": (100, None), "c": (50, 120)}  # run -> (fit, grok)
    for name, (fit, grok) in ends.items():
        sink.write_metrics([{"run_id": name, "step": 0, "test_acc": 0.0}])
        sink.write_run({"run_id": name, "status": "censored" if grok is None else "completed",
                        "fit_step": fit, "grok_step": grok, "steps_run": 400,
                        "censored": grok is None, "final_test_acc": 0.5 if grok is None else 1.0})
    sink.close()
    found = mlflow_runs("srt", order_by=["metrics.grok_step ASC"])
    assert list(found["tags.mlflow.runName"]) == ["c", "a", "b"]  # no grok step: last
    assert list(found["metrics.grok_step"][:2]) == [120.0, 300.0]
    assert found["metrics.grok_step"].isna().tolist() == [False, False, True]
    assert list(found["metrics.delay"][:2]) == [70.0, 200.0]
    assert list(found["metrics.censored"]) == [0.0, 0.0, 1.0]
    assert list(found["metrics.final_test_acc"]) == [1.0, 1.0, 0.5]
    assert "tags.grok_step" not in found  # never the text "None"
    held = mlflow_artifacts(mlflow_parent("srt")["run_id"], tmp_path / "got")
    assert held == {"sweep.yaml": "name: srt\n"}  # no Parquet rows: no analysis table


def test_a_resumed_mlflow_run_is_continued_without_repeating_steps(
    tmp_path: Path, mlflow_uri: str
) -> None:
    from mlflow.tracking import MlflowClient

    sweep_dir = tmp_path / "s"
    make_sweep_folder(sweep_dir)
    spec = [TrackerSpec("mlflow", mlflow_uri)]

    def rows(*steps: int) -> list[dict[str, Any]]:
        return [{"run_id": "s-r", "step": s, "test_acc": s / 100, "train_loss": 1.0}
                for s in steps]

    first = tracked(ListSink(), spec, "s", sweep_dir)
    first.write_metrics(rows(0, 10))
    first.write_metrics(rows(10, 20))  # a retry in the same session replays step 10
    first.write_run({"run_id": "s-r", "status": "interrupted", "steps_run": 20})  # train's
    first.close()  # the driver stopped before the run ended
    cut = mlflow_runs("s")  # an interrupted run row does not finish the tracker run
    assert len(cut) == 1 and cut.loc[0, "status"] == "KILLED"
    again = tracked(ListSink(), spec, "s", sweep_dir)  # --resume: a new session
    again.write_metrics(rows(10, 20, 30))
    again.write_run({"run_id": "s-r", "status": "censored", "steps_run": 30})
    again.close()
    found = mlflow_runs("s")
    assert len(found) == 1 and found.loc[0, "status"] == "FINISHED"
    history = MlflowClient().get_metric_history(found.loc[0, "run_id"], "test_acc")
    assert sorted(m.step for m in history) == [0, 10, 20, 30]


def test_a_failing_tracker_warns_once_and_the_sweep_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tracker_warnings: list[logging.LogRecord]
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # fail at once, not after retries
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    res = train(tmp_path, f"mlflow=http://127.0.0.1:{port}")
    assert res.exit_code == 0, res.output
    assert [r.levelno for r in tracker_warnings] == [logging.WARNING], tracker_warnings
    assert "mlflow tracker failed" in tracker_warnings[0].getMessage()
    runs, metrics = record(tmp_path / "o")
    assert len(runs) == 2 and all(len(rows) == 4 for rows in metrics.values())
    assert {r["status"] for r in runs.values()} <= {"grokked", "completed", "censored"}


# ---- Weights & Biases (offline) ----------------------------------------------------------

BLOCK = 32768
"""W&B's run file: a 7-byte header, then records in 32 KiB blocks (LevelDB log framing)."""


def wandb_records(path: Path) -> Iterator[Any]:
    """The protobuf records of an offline run's .wandb file."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, pending = path.read_bytes(), 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if room < 7 or (kind == 0 and length == 0):  # the zero padding at a block's end
            pos += room
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            rec = pb.Record()
            rec.ParseFromString(pending)
            pending = b""
            yield rec


def wandb_run(path: Path) -> dict[str, Any]:
    """What an offline run file holds: name, group, project, config, history, summary."""
    out: dict[str, Any] = {"config": {}, "history": [], "summary": {}}
    for rec in wandb_records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out.update(name=rec.run.display_name, group=rec.run.run_group,
                       project=rec.run.project)
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in rec.config.update})
        elif kind == "history":
            item = {"/".join(i.nested_key) or i.key: json.loads(i.value_json)
                    for i in rec.history.item}
            out["history"].append(item)
        elif kind == "summary":
            out["summary"].update({i.key: json.loads(i.value_json)
                                   for i in rec.summary.update if i.key})
    return out


@pytest.fixture
def wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "wandb-dir"
    folder.mkdir()
    # WANDB__SERVICE_WAIT: wandb-core gets 30 s to start by default, which a loaded 2-core CI
    # machine can exceed (seen here: the tracker then warns and the test finds no run).
    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(folder),
                        "WANDB_SILENT": "true", "WANDB__SERVICE_WAIT": "300"}.items():
        monkeypatch.setenv(name, value)
    yield folder
    import wandb

    wandb.teardown()  # stop the W&B service this test started


def test_wandb_offline_holds_each_run_as_the_parquet_does(
    tmp_path: Path, wandb_offline: Path
) -> None:
    res = train(tmp_path, "wandb=grokproj")
    assert res.exit_code == 0, res.output
    runs, metrics = record(tmp_path / "o")
    files = sorted(wandb_offline.glob("wandb/offline-run-*/*.wandb"))
    found = {r["name"]: r for r in map(wandb_run, files)}
    parent = found.pop("o")  # the sweep's own run, in the same group
    assert (parent["group"], parent["project"]) == ("o", "grokproj")
    held = {p.name: p.read_text() for f in files if wandb_run(f)["name"] == "o"
            for p in (f.parent / "files").glob("analysis.*")}
    printed = runner.invoke(app, ["analyze", str(tmp_path / "o"), "--format", "csv"])
    assert held["analysis.csv"] == printed.stdout and "analysis.md" in held
    assert sorted(found) == sorted(runs)  # one W&B run per run, named by its run id
    for run_id, got in found.items():
        run = runs[run_id]
        assert (got["group"], got["project"]) == ("o", "grokproj")
        assert {k: got["config"][k] for k in CONFIG_KEYS} == {k: run[k] for k in CONFIG_KEYS}
        numbers = {k: got["summary"][k] for k in SUMMARY_KEYS if k in got["summary"]}
        assert numbers == expected_summary(run) and got["summary"]["status"] == run["status"]
        assert [h["_step"] for h in got["history"]] == [r["step"] for r in metrics[run_id]]
        for key in METRIC_KEYS:
            logged = [(h["_step"], h[key]) for h in got["history"] if key in h]
            assert logged == series(metrics[run_id], key), key


def test_both_trackers_at_once(tmp_path: Path, mlflow_uri: str, wandb_offline: Path) -> None:
    res = train(tmp_path, f"mlflow={mlflow_uri}", "wandb", seeds="[3]")
    assert res.exit_code == 0, res.output
    assert_mlflow_equals_the_record(tmp_path / "o", "o")
    files = list(wandb_offline.glob("wandb/offline-run-*/*.wandb"))
    assert [wandb_run(f)["project"] for f in files] == ["sweepgrok"] * 2  # the run, the sweep


def test_the_tune_callback_mirrors_a_replayed_evaluation_once(
    tmp_path: Path, mlflow_uri: str
) -> None:
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from sweepgrok.tune.callback import ParquetCallback
    from sweepgrok.tune.trainable import PAYLOAD

    sweep_dir = tmp_path / "cb"
    make_sweep_folder(sweep_dir)
    callback = ParquetCallback(sweep_dir, "cb", total=1, live=False,
                               trackers=[TrackerSpec("mlflow", mlflow_uri)])
    trial = SimpleNamespace(trial_id="t0", config={}, status="RUNNING")

    def report(*steps: int, finished: bool = False) -> None:
        metrics = [{"run_id": "cb-t0", "step": s, "test_acc": s / 100} for s in steps]
        ended = [{"run_id": "cb-t0", "status": "censored", "steps_run": steps[-1]}]
        payload = {"metrics": metrics, "finished": ended if finished else []}
        callback.on_trial_result(0, [trial], trial, {PAYLOAD: json.dumps(payload)})

    report(0)
    report(10)
    report(10)  # the retry from the checkpoint at step 0 replays step 10
    report(20, finished=True)
    callback.on_experiment_end([trial])
    found = mlflow_runs("cb")
    assert list(found["tags.mlflow.runName"]) == ["cb-t0"]
    history = MlflowClient().get_metric_history(found.loc[0, "run_id"], "test_acc")
    assert sorted(m.step for m in history) == [0, 10, 20]
    assert len(read_table(sweep_dir, "metrics")) == 3  # the Parquet, deduplicated, agrees


@pytest.mark.parametrize("target", ["sqlite:///mlflow.db", None, "absolute"])
def test_mlflow_artifacts_stay_beside_the_database_through_a_fit_and_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str | None
) -> None:
    """The fit runs in the sweep folder (run_tuner's working_in), where MLflow opened a relative
    store, its default one and its artifact root (./mlruns), so --fresh deleted them."""
    from conftest import GROKS, write_sweep
    from mlflow.tracking import MlflowClient

    from sweepgrok.store.sweepdir import prepare_grid_folder
    from sweepgrok.tune.callback import ParquetCallback
    from sweepgrok.tune.grid import working_in

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # None: MLflow's default store
    monkeypatch.chdir(tmp_path)  # where the user starts `sweepgrok launch`
    db = tmp_path / "mlflow.db"
    spec = TrackerSpec("mlflow", f"sqlite:///{db}" if target == "absolute" else target)
    sweep_dir = tmp_path / "runs" / "fit"
    make_sweep_folder(sweep_dir)
    write_sweep(sweep_dir, GROKS)  # the record; the tracker opens when the sink is first used
    callback = ParquetCallback(sweep_dir, "fit", total=1, live=False, trackers=[spec])
    with working_in(sweep_dir):  # as the fit runs, until the callback closes
        callback.close()
    assert db.is_file() and sorted(p.name for p in sweep_dir.iterdir()) == [
        ".sweepgrok", "metrics", "runs"]  # no database, mlruns or mlartifacts in the sweep
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("fit")
    root = tmp_path / "mlartifacts"
    assert experiment.artifact_location == str(root / experiment.experiment_id)
    assert client.get_experiment("0").artifact_location == str(root / "0")  # Default, too
    (parent,) = client.search_runs([experiment.experiment_id],
                                   "tags.`sweepgrok.parent` = 'true'")

    def held() -> dict[str, str]:
        into = Path(client.download_artifacts(parent.info.run_id, "", str(tmp_path / "got")))
        return {p.name: p.read_text() for p in into.iterdir()}

    attached = held()
    assert sorted(attached) == ["analysis.csv", "analysis.md", "report.html"]
    # The sweep's report, as `sweepgrok report SWEEP_DIR --html` makes it, by default.
    assert "<strong>Result</strong>: fastest: norm=sphere (KM median 300, n = 3)" in (
        attached["report.html"])
    prepare_grid_folder(sweep_dir, resume=False, fresh=True)  # what --fresh does
    assert not sweep_dir.exists()
    (tmp_path / "got").rename(tmp_path / "got-before")
    assert held() == attached


# ---- through Ray: a retried trial replays steps, the tracker holds each once -------------


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_retried_trial_logs_each_step_once(
    tmp_path: Path, mlflow_uri: str, ray_env: dict[str, str]
) -> None:
    from failing_trainer import fail_once

    from sweepgrok.config.grid_file import load_grid
    from sweepgrok.tune.grid import launch_grid

    grid = write_grid(tmp_path / "g.yaml", "trk", grid={"model.norm": ["none", "sphere"]},
                      seeds=[1, 2], seeds_per_trial=2, checkpoint_every=2, max_failures=1)
    marks = tmp_path / "fail-marks"
    outcome = launch_grid(load_grid(grid), tmp_path / "trk", num_cpus=2, live=False,
                          train_fn=fail_once(marks),
                          trackers=[TrackerSpec("mlflow", mlflow_uri)])
    assert (outcome.terminated, outcome.errored) == (2, 0)
    assert len(list(marks.iterdir())) == 2  # both trials crashed once and replayed steps
    raw = read_table(tmp_path / "trk", "metrics")  # deduplicated: the record
    parts = list((tmp_path / "trk" / "metrics").glob("part-*.parquet"))
    import pyarrow.parquet as pq

    # The replayed steps were written twice, then compacted when the launch ended: the folder
    # holds each (run, step) once (sweepgrok.store.compact).
    assert sum(pq.read_metadata(p).num_rows for p in parts) == raw.num_rows
    # 4 runs, each step once. A replayed step's wall_time differs between the two attempts:
    # the tracker holds the first attempt's (each step is sent once), the record the replay's
    # (its last write wins); every deterministic metric is the same in both.
    assert_mlflow_equals_the_record(tmp_path / "trk", "trk", skip=("wall_time",))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_launch_then_fresh_keeps_the_mlflow_database_and_artifacts(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    """`sweepgrok launch --tracker mlflow=sqlite:///mlflow.db` as a user types it (relative:
    the directory it is started in), then the same launch with --fresh."""
    import subprocess

    from mlflow.tracking import MlflowClient

    grid = write_grid(tmp_path / "g.yaml", "fr", grid={"model.norm": ["none", "sphere"]},
                      seeds=[1])
    command = [str(Path(sys.executable).parent / "sweepgrok"), "launch", str(grid),
               "--storage", str(tmp_path / "runs"), "--tracker", "mlflow=sqlite:///mlflow.db"]
    env = {k: v for k, v in ray_env.items() if k != "MLFLOW_TRACKING_URI"}
    sweep_dir = tmp_path / "runs" / "fr"
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")

    def parents() -> list[Any]:
        experiment = client.get_experiment_by_name("fr")
        return client.search_runs([experiment.experiment_id], "tags.`sweepgrok.parent` = 'true'",
                                  order_by=["attributes.start_time ASC"])

    def held(run_id: str, into: Path) -> list[str]:
        return sorted(p.name for p in Path(client.download_artifacts(run_id, "", str(into)))
                      .iterdir())

    for args in ([], ["--fresh"]):
        done = subprocess.run([*command, *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=500)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not {"mlflow.db", "mlruns", "mlartifacts"} & {p.name for p in sweep_dir.iterdir()}
    first, second = parents()  # --fresh: a new parent run; the first one's files are intact
    for n, run in enumerate((first, second)):
        assert held(run.info.run_id, tmp_path / f"got{n}") == [
            "analysis.csv", "analysis.md", "report.html", "sweep.yaml"]
        assert run.info.artifact_uri.startswith(str(tmp_path / "mlartifacts"))
