"""The shared trainer at toy scale: rows, schedule, resume, divergence, external stops."""

import math
from pathlib import Path

import pytest
import torch
from conftest import tiny_config

from sweepgrok.config.trial import from_flat, load_config
from sweepgrok.store.sink import METRICS_SCHEMA, ListSink
from sweepgrok.train.trainer import CHECKPOINT_FILE, CheckpointError, Trainer, eval_steps, train

TINY = tiny_config(
    {"task.p": 11, "train.max_steps": 60, "train.eval_every": 10,
     "train.stop_after_grok": False, "geometry.sample": 32, "geometry.knn_k": 3},
    # The default schedule (early evaluations); device auto runs on a GPU where there is one.
    defaults=("train.early_evals", "train.device"),
)


def _cfg(**kw):
    return from_flat({**TINY, **kw})


def _trajectory(sink, after=-1):
    # Everything but wall time must match bit for bit.
    return [{k: v for k, v in m.items() if k != "wall_time"} for m in sink.metrics
            if m["step"] > after]


def test_eval_schedule():
    assert eval_steps(1000, 200, early=True) == [0, 1, 2, 5, 10, 20, 50, 100, 200, 400, 600,
                                                 800, 1000]
    assert eval_steps(450, 200, early=False) == [0, 200, 400, 450]


def test_rows_follow_the_schema_and_fractions():
    sink = ListSink()
    (row,) = train(_cfg(), sink)
    assert {m["step"] for m in sink.metrics} == set(eval_steps(60, 10, True))
    assert set(sink.metrics[0]) <= set(METRICS_SCHEMA.names)
    for m in sink.metrics:
        assert 0.0 <= m["train_acc"] <= 1.0 and 0.0 <= m["test_acc"] <= 1.0
        assert m["deff"] > 0 and m["rho"] >= 0 and m["weight_norm"] > 0
        assert 0 < m["fourier_frac"] <= 1 + 1e-6 and 0 < m["fourier_unembed_frac"] <= 1 + 1e-6
        assert len(m["fourier_unembed_freqs"].split(",")) == 5  # top 8 capped at p // 2
    assert row["steps_run"] == 60 and row["status"] in ("completed", "censored")
    assert row["task.p"] == 11 and row["torch_version"] and row["host"]
    assert sink.runs == [row]
    assert {g["layer"] for g in sink.geometry} == {0}


def test_seeds_are_separate_split_and_init():
    a = train(_cfg(**{"train.seed": 1}), ListSink())[0]
    b = train(_cfg(**{"train.seed": 2}), ListSink())[0]
    assert a["run_id"] != b["run_id"] and a["task.data_seed"] == b["task.data_seed"] == 0
    c = train(_cfg(**{"train.seed": 2, "task.split_follows_seed": True}), ListSink())[0]
    assert c["task.data_seed"] == 2


@pytest.mark.parametrize(
    "extra",
    [{}, {"optim.batch_size": 16, "geomdr.enabled": True, "geomdr.start_step": 10,
          "geomdr.ramp_steps": 10, "geomdr.subsample": 0.5, "geomdr.target_dim": 2},
     # The Grokfast state (ring of the last 20 gradients, full and wrapped at the checkpoint)
     # travels in the checkpoint; with the other accelerators on.
     {"grokfast.kind": "ma", "grokfast.window": 20, "grokfast.lam": 5.0,
      "optim.loss": "stablemax", "optim.perpendicular_grad": True},
     {"grokfast.kind": "ema", "optim.batch_size": 16},
     # The warm GeomDR bases (geomdr.solver subspace) travel in the checkpoint.
     {"geomdr.enabled": True, "geomdr.start_step": 10, "geomdr.ramp_steps": 10,
      "geomdr.subsample": 0.5, "geomdr.target_dim": 2, "geomdr.solver": "subspace"}],
    ids=["plain", "minibatch-geomdr", "grokfast-ma-stablemax-perpendicular", "grokfast-ema",
         "geomdr-subspace"],
)
def test_resume_is_bit_identical(tmp_path, extra):
    cfg = _cfg(**extra)
    whole = ListSink()
    train(cfg, whole)

    class Crash(Exception):
        pass

    def crash_at_30(report):
        if report.step == 30:
            report.save_checkpoint(tmp_path / "ckpt")
            raise Crash

    first = ListSink()
    with pytest.raises(Crash):
        train(cfg, first, on_eval=crash_at_30)
    assert (tmp_path / "ckpt" / "trainer.pt").stat().st_mode & 0o777 == 0o600  # owner-only
    resumed = ListSink()
    rows = train(cfg, resumed, resume_from=tmp_path / "ckpt")
    assert min(m["step"] for m in resumed.metrics) == 40  # nothing before the checkpoint again
    assert _trajectory(resumed) == _trajectory(whole, after=30)
    assert {k: v for k, v in rows[0].items() if k not in ("wall_time", "finished_at")} == {
        k: v for k, v in whole.runs[0].items() if k not in ("wall_time", "finished_at")}


class _Payload:
    """Unpickling this runs code: it opens (creates) the file named by `flag`."""

    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (open, (str(self.flag), "w"))


@pytest.mark.parametrize("content", ["crafted", "garbage", "not a dict"])
def test_resume_never_runs_code_from_a_checkpoint(tmp_path, content):
    flag = tmp_path / "pwned"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    if content == "crafted":
        torch.save({"version": 1, "run_ids": _Payload(flag)}, ckpt / CHECKPOINT_FILE)
    elif content == "garbage":
        (ckpt / CHECKPOINT_FILE).write_bytes(b"\x80\x04garbage")
    else:
        torch.save([1, 2], ckpt / CHECKPOINT_FILE)
    with pytest.raises(CheckpointError, match=r"trainer\.pt: not a sweepgrok checkpoint"):
        train(_cfg(), ListSink(), resume_from=ckpt)
    assert not flag.exists()


@pytest.mark.parametrize("part", ["gens", "model", "active"])
def test_a_checkpoint_with_a_part_of_the_wrong_kind_is_refused(tmp_path, part):
    # Right version and run ids, one part replaced by something save_checkpoint never writes.
    cfg = _cfg(**{"train.max_steps": 20})

    def save_at_10(report):
        if report.step == 10:
            report.save_checkpoint(tmp_path / "ckpt")

    train(cfg, ListSink(), on_eval=save_at_10)
    state = torch.load(tmp_path / "ckpt" / CHECKPOINT_FILE, weights_only=True)
    state[part] = {"gens": [1], "model": {"w": torch.zeros(2)}, "active": [99]}[part]
    torch.save(state, tmp_path / "ckpt" / CHECKPOINT_FILE)
    with pytest.raises(CheckpointError, match=r"trainer\.pt: not a sweepgrok checkpoint of this"):
        Trainer(cfg).load_checkpoint(tmp_path / "ckpt")


def test_nan_loss_ends_as_diverged_not_a_crash():
    sink = ListSink()
    (row,) = train(_cfg(**{"optim.lr": 1e30, "optim.weight_decay": 0.0}), sink)
    assert row["status"] == "diverged" and row["censored"]
    assert row["steps_run"] < 60
    assert not math.isfinite(sink.metrics[-1]["train_loss"])


def test_external_stop_is_recorded_censored_at_that_step():
    def cap(report):
        if report.step == 20:
            for m in report.metrics:
                report.stop(m["run_id"])

    sink = ListSink()
    (row,) = train(_cfg(), sink, on_eval=cap)
    assert row["status"] == "censored" and row["steps_run"] == 20
    assert max(m["step"] for m in sink.metrics) == 20 and sink.runs == [row]


def test_stopping_a_run_that_just_ended_changes_nothing():
    def cap_twice(report):
        for m in report.metrics:
            report.stop(m["run_id"])
            report.stop(m["run_id"])  # twice: still one row

    cfg = _cfg(**{"train.max_steps": 10, "train.early_evals": False})
    sink = ListSink()
    (row,) = train(cfg, sink, on_eval=cap_twice)
    assert row["steps_run"] == 0 and len(sink.runs) == 1  # stopped at the first eval
    # At the last eval the run has already ended (budget): a stop must not add a second row.
    plain, capped = ListSink(), ListSink()
    train(cfg, plain)
    train(cfg, capped, on_eval=lambda r: cap_twice(r) if r.step == 10 else None)
    assert len(capped.runs) == 1 and capped.runs[0]["status"] == plain.runs[0]["status"]
    assert capped.runs[0]["steps_run"] == 10


def test_geomdr_off_matches_geomdr_that_never_starts():
    off, late = ListSink(), ListSink()
    train(_cfg(), off)
    train(_cfg(**{"geomdr.enabled": True, "geomdr.start_step": 10_000}), late)
    strip = [{k: v for k, v in m.items() if k not in ("wall_time", "geomdr_loss", "run_id")}
             for m in off.metrics]
    assert strip == [{k: v for k, v in m.items() if k not in ("wall_time", "geomdr_loss", "run_id")}
                     for m in late.metrics]


# 190 s measured on 2 heavily shared cores (1500 steps of the quick trial).
@pytest.mark.timeout(600)
def test_stop_after_grok_ends_the_run_at_its_grok_step():
    cfg = load_config(Path(__file__).parents[2] / "search_spaces" / "trials" / "trial_quick.yaml",
                      ["geometry.enabled=false", "train.max_steps=1500"])
    sink = ListSink()
    (row,) = train(cfg, sink)
    assert row["status"] == "grokked", row
    assert row["grok_step"] == row["steps_run"] == max(m["step"] for m in sink.metrics)
    assert row["fit_step"] < row["grok_step"]
    assert row["grok_step_95"] <= row["grok_step_99"] == row["grok_step"]
