"""The training step as a captured CUDA graph (train.cuda_graph) and the lazy compaction it uses.

On a CPU: which step kinds are refused and why, the config and machine checks, and that lazy
compaction (ended members kept in the ensemble until at most half still run) gives the rows of
immediate compaction (in float64, within CPU_TOL), resume included. On CUDA (skipped
elsewhere): graph runs give the rows of eager runs of the same config, every captured feature
included."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from conftest import GROK_APART, tiny_config

from sweepgrok.config.trial import ConfigError, from_flat
from sweepgrok.store.sink import ListSink
from sweepgrok.train.graphstep import capture_blockers, uses_graph
from sweepgrok.train.trainer import EvalReport, Trainer

# Four seeds that end at different evaluations (conftest.GROK_APART), on the CPU.
BASE: dict[str, Any] = tiny_config(GROK_APART, defaults=["train.early_evals"])
SEEDS = BASE["train.seeds"]
GEOMDR = {"geomdr.enabled": True, "geomdr.start_step": 20, "geomdr.ramp_steps": 20,
          "geomdr.target_dim": 4, "geomdr.lambda_max": 0.01, "geomdr.solver": "subspace"}
ACCEL = {"grokfast.kind": "ema", "optim.loss": "stablemax", "optim.perpendicular_grad": True}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _cfg(*parts: dict[str, Any]):
    """BASE with `parts` over it, later parts winning."""
    merged = dict(BASE)
    for part in parts:
        merged.update(part)
    return from_flat(merged)


# ---- which steps are captured -----------------------------------------------------------


def test_a_full_batch_step_with_every_capturable_feature_has_no_blockers():
    cfg = _cfg(GEOMDR, ACCEL)
    assert capture_blockers(cfg, n_train=400, penalized=False) == []
    assert capture_blockers(cfg, n_train=400, penalized=True) == []


@pytest.mark.parametrize(("over", "penalized", "names"), [
    ({"optim.batch_size": 64}, False, "optim.batch_size"),
    ({"grokfast.kind": "ma"}, False, "grokfast.kind ma"),
    ({**GEOMDR, "geomdr.subsample": 0.5}, True, "geomdr.subsample"),
    ({**GEOMDR, "geomdr.solver": "eigh"}, True, "geomdr.solver eigh"),
])
def test_each_uncapturable_feature_is_named(over, penalized, names):
    (why,) = capture_blockers(_cfg(over), n_train=400, penalized=penalized)
    assert names in why


def test_geomdr_blockers_apply_only_to_the_penalized_step():
    cfg = _cfg(GEOMDR, {"geomdr.solver": "eigh", "geomdr.subsample": 0.5})
    assert capture_blockers(cfg, n_train=400, penalized=False) == []
    assert len(capture_blockers(cfg, n_train=400, penalized=True)) == 2


def test_a_minibatch_as_large_as_the_training_set_is_full_batch():
    assert capture_blockers(_cfg({"optim.batch_size": 400}), n_train=400, penalized=False) == []


def test_a_trace_penalty_needs_no_eigensolver():
    cfg = _cfg(GEOMDR, {"geomdr.solver": "eigh", "geomdr.penalty": "trace"})
    assert capture_blockers(cfg, n_train=400, penalized=True) == []


@pytest.mark.parametrize(("setting", "device", "expected"), [
    ("auto", "cuda", True), ("on", "cuda", True), ("off", "cuda", False),
    ("auto", "cpu", False), ("off", "cpu", False)])
def test_graphs_are_used_on_cuda_unless_off(setting, device, expected):
    cfg = _cfg({"train.cuda_graph": setting, "train.device": "auto"})
    assert uses_graph(cfg, torch.device(device)) is expected


def test_cuda_graph_on_with_a_cpu_device_is_a_config_error():
    with pytest.raises(ConfigError, match=r"train.cuda_graph: on needs a CUDA device"):
        from_flat({**BASE, "train.cuda_graph": "on"})


def test_unknown_precision_names_the_allowed_values():
    with pytest.raises(ConfigError, match=r"highest.*high"):
        from_flat({**BASE, "train.matmul_precision": "medium"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_cuda_graph_on_where_torch_has_no_cuda_is_refused_before_training():
    from sweepgrok.config.trial import device_problem

    problem = device_problem("auto", "on")
    assert problem is not None and "train.cuda_graph: on" in problem
    assert "auto" in problem and "off" in problem
    assert device_problem("auto", "auto") is None


OUTCOME = ("run_id", "status", "fit_step", "grok_step", "steps_run", "censored")


CPU_TOL = (1e-4, 1e-5)
"""(rel, abs): a batch of another size rounds differently (lazy vs immediate compaction)."""
CUDA_TOL = (1e-3, 1e-4)
"""(rel, abs) of graph vs eager on CUDA: a capture may pick other cuBLAS algorithms (its
workspace differs). Measured on an H200 at step 150 of these lr-1e-2 runs: at most 2e-4
(train_loss) and 4e-4 (deff_test) relative, with the same fit and grok steps."""


def _close(a: Any, b: Any, tol: tuple[float, float] = CPU_TOL) -> bool:
    """Equal, floats to the tolerance `tol` (rel, abs)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=tol[0], abs_tol=tol[1])
    return a == b


def _assert_same(got: ListSink, want: ListSink, tol: tuple[float, float] = CPU_TOL) -> None:
    """The same runs (outcomes exactly) and rows (keys exactly, values to float tolerance)."""
    (g_metrics, g_geometry, g_runs), (w_metrics, w_geometry, w_runs) = _rows(got), _rows(want)
    assert [{k: r[k] for k in OUTCOME} for r in g_runs] == \
        [{k: r[k] for k in OUTCOME} for r in w_runs]
    for g_rows, w_rows in ((g_metrics, w_metrics), (g_geometry, w_geometry)):
        assert [(r["run_id"], r["step"]) for r in g_rows] == \
            [(r["run_id"], r["step"]) for r in w_rows]
        for g, w in zip(g_rows, w_rows, strict=True):
            assert g.keys() == w.keys()
            bad = {k: (g[k], w[k]) for k in g if not _close(g[k], w[k], tol)}
            assert not bad, (g["run_id"], g["step"], bad)


class _Stop(Exception):
    pass


# ---- lazy compaction (CPU, with an eager stand-in for the graph) ------------------------


class _EagerStandIn:
    """The GraphedStep interface, running the body eagerly: the trainer compacts lazily as it
    does with a captured step, and the test counts the re-captures it would cost."""

    def __init__(self, trainer: Trainer) -> None:
        self.body, self.resets = trainer._step_body, 0

    def __call__(self, lam: float) -> None:
        self.body(lam, lam > 0)

    def reset(self) -> None:
        self.resets += 1


# Six members, in float64 (float64_weights): two end at step 110 (four still run: kept), one at
# 120 (three run: compacted), one at 130 (two of three run: kept), two at 140 (compacted again).
LAZY = {"train.seeds": [0, 1, 2, 3, 4, 5], "train.max_steps": 160}


@pytest.fixture
def float64_weights():
    """Models built in float64 for the lazy-compaction tests. An ensemble of another size can
    round differently in float32 (a CPU model with other AVX-512 kernels than this test's
    machine), and these lr-1e-2 runs amplify a last-digit difference past any tolerance within
    a hundred steps, grok steps included; float64 keeps such differences ~1e-12 apart."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _lazy(cfg) -> Trainer:
    trainer = Trainer(cfg)
    trainer.graphed = _EagerStandIn(trainer)  # type: ignore[assignment]
    return trainer


def _rows(sink: ListSink) -> tuple[list[dict], list[dict], list[dict]]:
    def strip(rows):
        return sorted(({k: v for k, v in r.items() if k not in ("wall_time", "finished_at")}
                       for r in rows), key=lambda r: (r["run_id"], r.get("step", 0),
                                                      r.get("layer", 0)))
    return strip(sink.metrics), strip(sink.geometry), strip(sink.runs)


@pytest.mark.slow
@pytest.mark.usefixtures("float64_weights")
def test_lazy_compaction_gives_the_rows_of_immediate_compaction():
    cfg = _cfg(LAZY)
    eager_sink, lazy_sink = ListSink(), ListSink()
    Trainer(cfg).run(eager_sink, None)
    lazy = _lazy(cfg)
    seen_ended: list[int] = []
    lazy.run(lazy_sink, lambda r: seen_ended.append(len(r._trainer.ended)))
    _assert_same(lazy_sink, eager_sink)
    # The run really kept ended members in the ensemble (seen at the next evaluation), then
    # compacted: at 120 with three of six running, at 140 when the last ones ended.
    assert sorted(r["steps_run"] for r in eager_sink.runs) == [110, 110, 120, 130, 140, 140]
    assert max(seen_ended) == 2
    assert lazy.graphed.resets == 2  # type: ignore[union-attr]


SAVE_AT: dict[str, Callable[[EvalReport], bool]] = {
    # Step 110: two runs end there (their rows go out with the checkpoint); the resumed run
    # keeps them in the ensemble as ended members.
    "where the first runs end": lambda report: bool(report.finished),
    # Step 120: ended members fill slots (saved in the checkpoint), and one more run ends.
    "with ended members in the ensemble": lambda report: bool(report._trainer.ended),
}


@pytest.mark.slow
@pytest.mark.usefixtures("float64_weights")
@pytest.mark.parametrize("when", list(SAVE_AT))
def test_resume_with_ended_members_in_the_ensemble_gives_the_rows_of_one_run(tmp_path, when):
    cfg = _cfg(LAZY)
    whole = ListSink()
    states: dict[int, tuple[list[int], list[int]]] = {}  # seen at step s: the state after s-10

    def record(report: EvalReport) -> None:
        states[report.step] = (list(report._trainer.active), sorted(report._trainer.ended))

    _lazy(cfg).run(whole, record)
    first = ListSink()
    saved: list[int] = []

    def save_once(report: EvalReport) -> None:
        if SAVE_AT[when](report) and not saved:
            # As the product's hooks do (train's Checkpoints, Tune's report): the run rows of
            # this evaluation go out with the checkpoint; the trainer writes them after on_eval.
            first.runs += report.finished
            report.save_checkpoint(tmp_path)
            saved.append(report.step)
            raise _Stop

    with pytest.raises(_Stop):
        _lazy(cfg).run(first, save_once)
    (step,) = saved
    rest = ListSink()
    resumed = _lazy(cfg)
    resumed.load_checkpoint(tmp_path)
    # The ensemble the uninterrupted run went on with after `step`: ended members included.
    assert (resumed.active, sorted(resumed.ended)) == states[step + 10]
    assert resumed.ended or when != "where the first runs end"
    resumed.run(rest, None)
    joined = ListSink()
    joined.metrics = [m for m in first.metrics if m["step"] <= step] + rest.metrics
    joined.geometry = [g for g in first.geometry if g["step"] <= step] + rest.geometry
    ended_first = {r["run_id"] for r in first.runs}
    joined.runs = first.runs + [r for r in rest.runs if r["run_id"] not in ended_first]
    _assert_same(joined, whole)


# ---- CUDA: graph runs equal eager runs --------------------------------------------------


def _cuda_run(over: dict[str, Any], graph: str) -> tuple[ListSink, Trainer]:
    cfg = _cfg(over, {"train.device": "cuda", "train.cuda_graph": graph})
    # The same run ids for both settings (cuda_graph is a key of the config hash).
    trainer, sink = Trainer(cfg, run_ids=[f"seed{s}" for s in SEEDS]), ListSink()
    trainer.run(sink, None)
    return sink, trainer


@cuda
@pytest.mark.parametrize("over", [{}, GEOMDR, ACCEL, {"optim.warmup_steps": 30},
                                  {**GEOMDR, **ACCEL, "model.norm": "layernorm"}],
                         ids=["plain", "geomdr-subspace", "grokfast-stablemax-perp", "warmup",
                              "all"])
def test_graph_runs_give_the_rows_of_eager_runs(over):
    eager, _ = _cuda_run(over, "off")
    graphed, trainer = _cuda_run(over, "on")
    assert trainer.graphed is not None and trainer.graphed.replays > 50
    assert trainer.graphed.captures <= 1 + 2 + (1 if over.get("geomdr.enabled") else 0)
    _assert_same(graphed, eager, CUDA_TOL)


@cuda
def test_an_uncapturable_step_runs_eagerly_and_says_so_once(caplog):
    caplog.set_level(logging.WARNING, logger="sweepgrok.train.graphstep")
    eager, _ = _cuda_run({"optim.batch_size": 64}, "off")
    graphed, trainer = _cuda_run({"optim.batch_size": 64}, "on")
    assert trainer.graphed is not None and trainer.graphed.captures == 0
    said = [r.getMessage() for r in caplog.records if "runs eagerly" in r.getMessage()]
    assert len(said) == 1 and "optim.batch_size" in said[0]
    _assert_same(graphed, eager)


@cuda
def test_a_graph_run_resumes_bit_identically(tmp_path):
    cfg = _cfg(GEOMDR, ACCEL, {"train.device": "cuda", "train.cuda_graph": "on"})
    whole = ListSink()
    Trainer(cfg).run(whole, None)
    first = ListSink()

    def save_at_80(report: EvalReport) -> None:
        if report.step == 80:
            report.save_checkpoint(tmp_path)
            raise _Stop

    with pytest.raises(_Stop):
        Trainer(cfg).run(first, save_at_80)
    resumed, rest = Trainer(cfg), ListSink()
    resumed.load_checkpoint(tmp_path)
    resumed.run(rest, None)
    want = [m for m in _rows(whole)[0] if m["step"] > 80]
    assert _rows(rest)[0] == want
