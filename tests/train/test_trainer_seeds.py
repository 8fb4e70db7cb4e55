"""Several seeds in lockstep (train.seeds) give the rows of separate runs, one run per seed:
the same run_ids, metrics at every evaluation (float tolerance), fit/grok steps and statuses,
including members that stop early (grokked, diverged) while the others go on."""

import math

import pytest
from conftest import GROK_APART, tiny_config

from sweepgrok.config.trial import Config, from_flat
from sweepgrok.store.sink import ListSink
from sweepgrok.train.trainer import EvalReport, train

# Four seeds that end at different evaluations (conftest.GROK_APART), on the CPU.
BASE = tiny_config(GROK_APART, defaults=["train.early_evals"])
SEEDS = BASE["train.seeds"]
OUTCOME = ("run_id", "status", "fit_step", "grok_step", "grok_step_95", "grok_step_99",
           "censored", "steps_run", "collapse_step", "train.seed", "task.data_seed")


def _by_run(sink: ListSink) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for m in sink.metrics:
        out.setdefault(m["run_id"], []).append({k: v for k, v in m.items() if k != "wall_time"})
    return out


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)
    return a == b


def _assert_same_rows(batched: ListSink, separate: list[ListSink]) -> None:
    rows = {r["run_id"]: r for r in batched.runs}
    metrics = _by_run(batched)
    for sink in separate:
        (alone,) = sink.runs
        mine = rows[alone["run_id"]]  # same run_id as the separate run
        assert {k: mine[k] for k in OUTCOME} == {k: alone[k] for k in OUTCOME}
        got, want = metrics[alone["run_id"]], _by_run(sink)[alone["run_id"]]
        assert [m["step"] for m in got] == [m["step"] for m in want]
        for g, w in zip(got, want, strict=True):
            assert g.keys() == w.keys()
            bad = {k: (g[k], w[k]) for k in g if not _close(g[k], w[k])}
            assert not bad, (g["step"], bad)
    assert len(rows) == len(separate) == len(batched.runs)


def _separate(cfg: Config, on_eval=None) -> list[ListSink]:
    sinks = []
    for seed in cfg.train.seed_list:
        sink = ListSink()
        train(cfg.member(seed), sink, on_eval=on_eval)
        sinks.append(sink)
    return sinks


@pytest.mark.parametrize(
    ("extra", "early_stops"),
    [({}, True),
     # Per-member minibatch order and GeomDR subsets (no seed groks within this budget).
     ({"optim.batch_size": 64, "geomdr.enabled": True, "geomdr.start_step": 20,
       "geomdr.ramp_steps": 20, "geomdr.subsample": 0.5, "geomdr.target_dim": 4,
       "geomdr.lambda_max": 0.01}, False),
     # The accelerators, per member: Grokfast's EMA state, the StableMax loss and the
     # perpendicular gradient (no seed groks within this budget).
     ({"grokfast.kind": "ema", "optim.loss": "stablemax", "optim.perpendicular_grad": True},
      False),
     # Grokfast's reference optimizer: Adam with an L2 term (no seed groks in this budget).
     ({"grokfast.kind": "ema", "optim.optimizer": "adam", "optim.weight_decay": 0.005}, False)],
    ids=["full-batch", "minibatch-geomdr", "grokfast-ema-stablemax-perpendicular",
         "grokfast-ema-adam-l2"],
)
def test_batched_seeds_equal_separate_runs_with_early_stops(extra, early_stops):
    cfg = from_flat({**BASE, **extra, "train.seeds": SEEDS})
    batched = ListSink()
    train(cfg, batched)
    _assert_same_rows(batched, _separate(cfg))
    if not early_stops:
        return
    # The grid really exercised compaction: someone stopped early, someone went on.
    ends = sorted(r["steps_run"] for r in batched.runs)
    grokked = [r for r in batched.runs if r["status"] == "grokked"]
    assert grokked and ends[0] < ends[-1] == cfg.train.max_steps


def _poison(seed: int, at: int):
    """on_eval hook: at step `at`, set every parameter of member `seed` to NaN."""

    def hook(report: EvalReport) -> None:
        if report.step != at:
            return
        trainer = report._trainer
        for slot, m in enumerate(trainer.active):
            if trainer.seeds[m] == seed:
                for p in trainer.model.parameters():
                    p.data[slot] = math.nan

    return hook


def test_a_diverged_member_leaves_the_others_unaffected():
    cfg = from_flat({**BASE, "train.seeds": SEEDS, "geomdr.enabled": True,
                     "geomdr.start_step": 0, "geomdr.ramp_steps": 0,
                     "geomdr.lambda_max": 0.01, "geomdr.target_dim": 4})
    hook = _poison(seed=1, at=40)
    batched = ListSink()
    train(cfg, batched, on_eval=hook)
    separate = _separate(cfg, on_eval=hook)  # the hook only touches the seed-1 run
    _assert_same_rows(batched, separate)
    status = {r["train.seed"]: r for r in batched.runs}
    assert status[1]["status"] == "diverged" and status[1]["steps_run"] == 50
    assert all(status[s]["status"] != "diverged" for s in (0, 2, 3))
    assert all(status[s]["steps_run"] > 50 for s in (0, 2, 3))
