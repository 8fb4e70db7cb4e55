"""The live view of `launch`: the terminal table from a fake progress state, the log line of a
trial that ended as the driver callback prints it, and the one Ray greeting an embedded start
drops (other Ray warnings pass)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from sweepgrok.tune.callback import ParquetCallback
from sweepgrok.tune.grid import TOKEN_GREETING, TOKEN_LOGGER, without_token_greeting
from sweepgrok.tune.progress import ProgressState, ended_line, progress_table
from sweepgrok.tune.trainable import PAYLOAD


def rendered(state: ProgressState, elapsed: float, max_rows: int = 20) -> str:
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(progress_table(state, elapsed, max_rows))
    return console.export_text()


def test_the_table_shows_counts_and_each_running_trial() -> None:
    state = ProgressState("g", total=8, done=3, failed=1, grokked=2, running=2,
                          latest={"b_00004": (1200, 0.5), "a_00003": (40, None)})
    text = rendered(state, 3725)
    assert "g: 3/8 trials done, 2 running, 1 failed, 2 run(s) grokked  1:02:05" in text
    lines = [line.split() for line in text.splitlines()]
    assert ["a_00003", "40", "-"] in lines and ["b_00004", "1,200", "0.500"] in lines
    assert text.index("a_00003") < text.index("b_00004")


def test_the_table_caps_its_rows() -> None:
    latest = {f"t{i:02d}": (i, 0.1) for i in range(5)}
    text = rendered(ProgressState("g", 5, running=5, latest=latest), 0, max_rows=3)
    assert "t02" in text and "t03" not in text and "... 2 more" in text


def test_ended_line_names_every_run() -> None:
    runs = [
        {"run_id": "g-t1-s1", "status": "grokked", "grok_step": 350, "steps_run": 400},
        {"run_id": "g-t1-s2", "status": "censored", "grok_step": None, "steps_run": 1000},
    ]
    assert ended_line("t1", runs) == (
        "trial t1 ended: g-t1-s1 grokked grok_step=350 steps=400; "
        "g-t1-s2 censored grok_step=- steps=1000"
    )
    assert ended_line("t2", [], failed=True) == "trial t2 failed: no runs"


def test_the_callback_prints_one_line_per_ended_trial_in_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    callback = ParquetCallback(tmp_path / "g", "g", total=1, live=True)
    callback.setup()  # stdout is captured (not a terminal): the log lines, no table
    trial = SimpleNamespace(trial_id="t1", status="RUNNING")
    metrics = [{"run_id": "g-t1", "step": 20, "train_acc": 1.0, "test_acc": 0.99}]
    run = {"run_id": "g-t1", "status": "grokked", "grok_step": 20, "steps_run": 20}
    result = {PAYLOAD: json.dumps({"metrics": metrics, "finished": [run]}), "step": 20,
              "test_acc": 0.99}
    callback.on_trial_result(0, [trial], trial, result)
    assert capsys.readouterr().out == ""  # a result is no line; the trial's end is
    trial.status = "TERMINATED"
    callback.on_trial_complete(1, [trial], trial)
    callback.close([trial])
    assert capsys.readouterr().out == "trial t1 ended: g-t1 grokked grok_step=20 steps=20\n"


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_only_the_token_greeting_is_dropped_and_only_during_the_start() -> None:
    logger = logging.getLogger(TOKEN_LOGGER)
    collect = Collect()
    logger.addHandler(collect)
    greeting = f"{TOKEN_GREETING} Set RAY_AUTH_MODE=disabled to opt out."
    try:
        with without_token_greeting():
            logger.warning(greeting)
            logger.warning("Token authentication is disabled for this Ray cluster.")
        logger.warning(greeting)
    finally:
        logger.removeHandler(collect)
    assert collect.messages == ["Token authentication is disabled for this Ray cluster.", greeting]
