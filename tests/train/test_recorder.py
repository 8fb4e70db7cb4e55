"""sweepgrok.train.recorder: a plain PyTorch loop's evaluations, recorded as a sweep folder that
pandas, `sweepgrok analyze`, `status` and `ls` read back; the grok and fit steps are those the
logged accuracies give; an unfinished recorder leaves an interrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import torch

import sweepgrok as sg
from sweepgrok.train.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent / "sweepgrok"
P, EVAL_EVERY, BUDGET = 17, 25, 1000
CONFIG = {"task": {"p": P, "train_fraction": 0.8}, "train": {"max_steps": BUDGET}}
"""What the loop below trains, as a trial config: its task and budget (the thresholds and
stop_after_grok are the defaults: 0.99, 0.99, true)."""


def modular_addition_mlp(rec: Recorder) -> list[dict[str, float]]:
    """A plain PyTorch loop (no sweepgrok in it but `rec.log`): an MLP on (a + b) mod 17, full
    batch AdamW; it groks within a few hundred steps. Returns what it logged."""
    torch.manual_seed(0)
    a, b = torch.meshgrid(torch.arange(P), torch.arange(P), indexing="ij")
    x = torch.stack([a.flatten(), b.flatten()], 1)
    y = (x[:, 0] + x[:, 1]) % P
    order = torch.randperm(len(x))
    train, test = order[: int(0.8 * len(x))], order[int(0.8 * len(x)):]
    embed = torch.nn.Embedding(P, 64)
    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(128, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, P))
    opt = torch.optim.AdamW([*embed.parameters(), *mlp.parameters()], lr=1e-2, weight_decay=3.0)
    logged = []
    for step in range(BUDGET + 1):
        if step % EVAL_EVERY == 0:
            with torch.no_grad():
                lt, le = mlp(embed(x[train])), mlp(embed(x[test]))
            evaluation = {
                "train_acc": (lt.argmax(1) == y[train]).float().mean().item(),
                "test_acc": (le.argmax(1) == y[test]).float().mean().item(),
                "train_loss": torch.nn.functional.cross_entropy(lt, y[train]).item(),
                "test_loss": torch.nn.functional.cross_entropy(le, y[test]).item(),
                "margin": (lt.max(1).values - lt.mean(1)).mean(),  # a metric of our own
            }
            logged.append({"step": step, **evaluation, "margin": float(evaluation["margin"])})
            if rec.log(step, **evaluation):
                break
        loss = torch.nn.functional.cross_entropy(mlp(embed(x[train])), y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return logged


def first_step(logged: list[dict[str, float]], key: str, threshold: float) -> int | None:
    """By hand: the first logged step whose `key` reached `threshold`."""
    return next((e["step"] for e in logged if e[key] >= threshold), None)


def test_a_plain_torch_loop_is_read_back_as_a_sweep(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is the fastest on a shared machine
    try:
        with Recorder(tmp_path / "mlp", CONFIG) as rec:
            logged = modular_addition_mlp(rec)
    finally:
        torch.set_num_threads(threads)
    runs = pd.read_parquet(tmp_path / "mlp" / "runs")
    metrics = pd.read_parquet(tmp_path / "mlp" / "metrics").sort_values("step")
    assert len(runs) == 1 and len(metrics) == len(logged)
    run = runs.iloc[0]
    grok = first_step(logged, "test_acc", 0.99)
    assert grok is not None and run["grok_step"] == grok  # it grokked, where the log says
    assert run["grok_step_95"] == first_step(logged, "test_acc", 0.95)
    assert run["fit_step"] == first_step(logged, "train_acc", 0.99) < grok
    # stop_after_grok: the loop stopped at the evaluation where it grokked, as the trainer does
    assert run["status"] == "grokked" and run["steps_run"] == grok == logged[-1]["step"]
    assert run["task.p"] == P and run["train.max_steps"] == BUDGET and not run["censored"]
    assert metrics["step"].tolist() == [e["step"] for e in logged]
    assert metrics["margin"].tolist() == pytest.approx([e["margin"] for e in logged])
    assert metrics["test_loss"].tolist() == pytest.approx([e["test_loss"] for e in logged])
    assert sg.read_metrics(tmp_path / "mlp")["margin"].tolist() == pytest.approx(
        [e["margin"] for e in logged])

    done = subprocess.run([str(BIN), "analyze", str(tmp_path / "mlp"), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    (group,) = json.loads(done.stdout[: done.stdout.rindex("]") + 1])
    assert group["n"] == 1 and group["n_grokked"] == 1, group


UNFINISHED = textwrap.dedent("""
    import os, signal, sys
    from sweepgrok.train.recorder import Recorder

    rec = Recorder(sys.argv[1], {"train": {"max_steps": 1000}}, flush_every=2)
    for step in range(0, 500, 100):
        rec.log(step, train_acc=min(1.0, step / 200), test_acc=0.0, train_loss=1.0)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no finish
    # "exit": the script ends without finish()
""")


@pytest.mark.parametrize("end", ["exit", "kill"])
def test_an_unfinished_recorder_leaves_an_interrupted_run(tmp_path: Path, end: str) -> None:
    folder = tmp_path / "unfinished"
    proc = subprocess.run([sys.executable, "-c", UNFINISHED, str(folder), end],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == (-signal.SIGKILL if end == "kill" else 0), proc.stderr
    run = sg.read_runs(folder).iloc[0]
    # exit: every evaluation (atexit); kill: those of the last flush (2 of every 2 logged)
    last = 400 if end == "exit" else 300
    assert run["status"] == "interrupted" and run["steps_run"] == last
    assert run["fit_step"] == 200 and pd.isna(run["grok_step"])
    assert sg.read_metrics(folder)["step"].max() == last
    status = subprocess.run([str(BIN), "status", str(folder)], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert status.returncode == 0 and "interrupted" in status.stdout, status.stdout
    listed = subprocess.run([str(BIN), "ls", str(tmp_path)], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert listed.returncode == 0 and "unfinished" in listed.stdout, listed.stdout
    # analyze leaves it out (not ended), or keeps it censored where it stopped
    table = sg.analyze(folder, censor_interrupted=True)
    assert table.iloc[0]["n"] == 1 and table.iloc[0]["n_grokked"] == 0


def test_an_error_in_the_block_marks_the_run_failed(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="out of memory"), \
            Recorder(tmp_path / "f", {"train": {"max_steps": 100}}) as rec:
        rec.log(0, train_acc=0.1, test_acc=0.0)
        raise RuntimeError("out of memory")
    run = sg.read_runs(tmp_path / "f").iloc[0]
    assert run["status"] == "failed" and run["error"] == "RuntimeError: out of memory"


def test_budget_and_divergence_end_a_run_by_the_trainers_rule(tmp_path: Path) -> None:
    cfg = {"train": {"max_steps": 20}}
    rec = Recorder(tmp_path / "b", cfg, run_id="budget")
    assert not rec.log(10, train_acc=0.5, test_acc=0.1)
    assert rec.log(20, train_acc=0.5, test_acc=0.1) and rec.status == "censored"
    assert rec.finish()["censored"]
    rec = Recorder(tmp_path / "b", cfg, run_id="nan")
    assert rec.log(10, train_acc=0.5, test_acc=0.1, train_loss=float("nan"))
    assert rec.finish()["status"] == "diverged"
    rec = Recorder(tmp_path / "b", cfg, run_id="early")
    rec.log(10, train_acc=0.5, test_acc=0.1)
    assert rec.finish()["status"] == "censored"  # stopped before its budget: censored there
    runs = sg.read_runs(tmp_path / "b").set_index("run_id")["status"].to_dict()
    assert runs == {"budget": "censored", "nan": "diverged", "early": "censored"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.log(0, train_acc=95.0, test_acc=0.1),
         "train_acc: must be a fraction in [0, 1] (got 95.0): divide a percentage by 100"),
        (lambda r: (r.log(10, train_acc=0.1, test_acc=0.1),
                    r.log(10, train_acc=0.1, test_acc=0.1)),
         "step: must grow from one evaluation to the next (got 10 after 10)"),
        (lambda r: r.log(0, train_acc=0.1, test_acc=0.1, note="hi"),
         "note: must be a number (got 'hi')"),
        (lambda r: r.log(-1, train_acc=0.1, test_acc=0.1), "step: must be an int >= 0 (got -1)"),
    ],
)
def test_bad_input_raises_config_error(tmp_path: Path, call, message: str) -> None:
    rec = Recorder(tmp_path / "x", {})
    with pytest.raises(sg.ConfigError) as caught:
        call(rec)
    assert str(caught.value) == message
    rec.finished = True  # nothing to write at exit


def test_a_folder_refuses_a_second_recorder_of_the_same_run(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "x", {"train": {"seed": 3}})
    rec.log(0, train_acc=0.1, test_acc=0.1)
    rec.finish()
    with pytest.raises(sg.ConfigError, match=r"already holds run \w{12} \(this config's\)"):
        Recorder(tmp_path / "x", {"train": {"seed": 3}})
    Recorder(tmp_path / "x", {"train": {"seed": 4}}).finish()  # another seed: another run
    assert len(sg.read_runs(tmp_path / "x")) == 2
    with pytest.raises(sg.ConfigError, match=r"config: unknown key 'task\.q'"):
        Recorder(tmp_path / "y", {"task.q": 3})
