"""The shared trainer: one run, or several init seeds in lockstep as one batched model.

``train(cfg, sink, ...)`` knows nothing of Ray or Optuna: it reaches the world through a sink
(rows) and an ``on_eval`` callback (progress, checkpoints, external stops). What an evaluation
measures is ``sweepgrok.train.evaluation``; process-wide settings (threads, deterministic kernels,
malloc) are the caller's, through ``sweepgrok.train.process.configure_process``.

Loop habits: data resident on the device; no host sync inside a step (the only syncs are at
evaluations, one per evaluation); evaluation under ``torch.no_grad``; the last block computes
only the readout position. Members are independent: the loss is the sum of per-member mean
losses, the gradient shaping (``sweepgrok.train.accelerators``: Grokfast, perpendicular gradient) is
per member and the optimizer (AdamW, or Adam with an L2 term) is elementwise, so each member
follows exactly the trajectory it would alone.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from sweepgrok.config.tasks import make_split, split_seed_for
from sweepgrok.config.trial import Config, config_hash, update
from sweepgrok.core.interrupt import critical
from sweepgrok.store.provenance import provenance
from sweepgrok.store.sink import Sink
from sweepgrok.train import evaluation
from sweepgrok.train.accelerators import GradFilter, per_example_loss, perpendicular_grad_
from sweepgrok.train.ensemble import take
from sweepgrok.train.events import RunTracker, end_status, run_row
from sweepgrok.train.geomdr import WarmSubspaces, geomdr_lambda, geomdr_loss
from sweepgrok.train.graphstep import GraphedStep, uses_graph
from sweepgrok.train.models import ARCHS, build_model, is_decayed

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "trainer.pt"
CHECKPOINT_VERSION = 1
"""Layout of trainer.pt (Trainer.save_checkpoint); load_checkpoint refuses any other."""
OPTIMIZERS: dict[str, type[torch.optim.Adam] | type[torch.optim.AdamW]] = {
    "adamw": torch.optim.AdamW, "adam": torch.optim.Adam}
"""optim.optimizer -> its torch class (both take the same arguments; weight_decay is decoupled
in AdamW, an L2 term added to the gradient in Adam)."""
# Distinct streams per member so minibatch order and GeomDR subsets never share draws.
_BATCH_STREAM, _GEOMDR_STREAM, _GEOMETRY_STREAM, _GEOMETRY_TEST_STREAM = 1, 2, 3, 4


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from (damaged, crafted, or another run's)."""


def _why(err: BaseException) -> str:
    """The first line of an error's message (torch's can run to many), else its type's name."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def eval_steps(max_steps: int, eval_every: int, early: bool) -> list[int]:
    """Step 0, every eval_every steps, the last step, and (early) 1-2-5 log-spaced steps
    below eval_every so the first phase of a curve is visible on a log axis."""
    steps = set(range(0, max_steps + 1, eval_every)) | {max_steps}
    if early:
        k = 1
        while k < eval_every:
            steps |= {s for s in (k, 2 * k, 5 * k) if s < min(eval_every, max_steps)}
            k *= 10
    return sorted(steps)


def _stream_seed(seed: int, stream: int) -> int:
    return (seed * 1_000_003 + stream * 7919) % (2**63 - 1)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass
class EvalReport:
    """What the trainer hands to ``on_eval`` after each evaluation.

    Call ``stop`` before forwarding ``finished``: a stopped run's row is appended to it."""

    step: int
    metrics: list[dict[str, Any]]
    geometry: list[dict[str, Any]]
    finished: list[dict[str, Any]]
    _trainer: Trainer = field(repr=False)

    def save_checkpoint(self, path: str | Path) -> None:
        """Write the full trainer state to directory `path` (resume with resume_from=path)."""
        self._trainer.save_checkpoint(Path(path))

    def stop(self, run_id: str) -> None:
        """End `run_id` after this evaluation, recorded censored at this step."""
        self._trainer.request_stop(run_id, self)


EvalCallback = Callable[[EvalReport], None]
"""What the trainer calls after each evaluation (progress bars, checkpoints, external stops)."""


class Trainer:
    """State of one (possibly batched) training run; use ``train()``."""

    def __init__(
        self,
        cfg: Config,
        run_ids: Sequence[str] | None = None,
        sweep: str = "",
        run_extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.cfg = cfg
        self.seeds = cfg.train.seed_list
        self.members = [_member_config(cfg, s) for s in self.seeds]
        self.run_ids = list(run_ids) if run_ids else [config_hash(m) for m in self.members]
        if len(self.run_ids) != len(self.seeds):
            raise ValueError(f"{len(self.run_ids)} run_ids for {len(self.seeds)} seeds")
        self.device = _device(cfg.train.device)
        self.extra = {"sweep": sweep, **provenance(str(self.device)), **(run_extra or {})}
        self._load_data()
        self.model = build_model(cfg, self.seeds).to(self.device)
        self._check_plugin_model()
        for what in evaluation.not_measured(self.model, cfg):
            log.info("not measured: %s", what)
        self.opt = self._optimizer()
        self.grad_filter = GradFilter(cfg.grokfast)
        self.warm = WarmSubspaces() if cfg.geomdr.solver == "subspace" else None
        self.gens = [self._generator(s, _BATCH_STREAM) for s in self.seeds]
        self.geo_gens = [self._generator(s, _GEOMDR_STREAM) for s in self.seeds]
        self.trackers = [RunTracker.for_config(rid, cfg) for rid in self.run_ids]
        self.active = list(range(len(self.seeds)))  # member index of each ensemble slot
        self.ended: set[int] = set()
        """Members that ended but still fill a slot (a captured step compacts lazily)."""
        self.graphed = (
            GraphedStep(self._step_body, cfg, self.train_x.shape[1], self.device,
                        self.grad_filter, lambda: self.opt.zero_grad(set_to_none=True))
            if uses_graph(cfg, self.device) else None
        )
        self.step = 0
        self.elapsed = 0.0
        self.done: list[dict[str, Any]] = []
        self._stops: set[str] = set()

    # ---- set-up -------------------------------------------------------------------------

    def _check_plugin_model(self) -> None:
        """A plugin model's forward on two training rows: logits (E, N, n_classes), and hidden
        representations where GeomDR or geometry reads them (a plugin's mistake, named before
        training rather than as a shape error deep in a step)."""
        if self.cfg.model.arch in ARCHS:
            return
        hidden: list[Tensor] = []
        with torch.no_grad():
            logits = self.model(self.train_x[:, :2], hidden=hidden)
        want = (len(self.seeds), min(2, self.train_x.shape[1]), self.cfg.task.n_classes)
        who = f"model.arch: plugin {self.cfg.model.arch!r}"
        if not isinstance(logits, Tensor) or tuple(logits.shape) != want:
            got = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
            raise ValueError(f"{who}: forward must return logits (E, N, n_classes) = {want}, "
                             f"got {got}")
        bad = [tuple(h.shape) for h in hidden if h.dim() != 3 or h.shape[:2] != want[:2]]
        if bad:
            raise ValueError(f"{who}: hidden representations must be (E, N, d), got {bad}")
        if not hidden and self.cfg.geomdr.enabled:
            raise ValueError(f"{who}: geomdr.enabled needs hidden representations, and its "
                             "forward appends none to `hidden` (docs/extending.md)")
        if not hidden and self.cfg.geometry.enabled:
            log.info("not measured: geometry (deff, rho, ...): the model gives no hidden "
                     "representations")

    def _generator(self, seed: int, stream: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(_stream_seed(seed, stream))

    def _load_data(self) -> None:
        splits = [make_split(self.cfg.task, split_seed_for(self.cfg.task, s)) for s in self.seeds]
        dev = self.device
        self.train_x = torch.stack([s.train_x for s in splits]).to(dev)  # (E, N, 3)
        self.train_y = torch.stack([s.train_y for s in splits]).to(dev)  # (E, N)
        self.test_x = torch.stack([s.test_x for s in splits]).to(dev)
        self.test_y = torch.stack([s.test_y for s in splits]).to(dev)
        # Fixed, seeded subsamples of the training and the test points on which geometry is
        # measured (test: D_eff only), by the same rule.
        self.geo_idx = self._geometry_sample(self.train_x.shape[1], _GEOMETRY_STREAM)
        self.geo_test_idx = self._geometry_sample(self.test_x.shape[1], _GEOMETRY_TEST_STREAM)

    def _geometry_sample(self, n: int, stream: int) -> Tensor:
        """(E, min(geometry.sample, n)): each member's first rows of a seeded permutation."""
        g = self.cfg.geometry.sample
        return torch.stack(
            [
                torch.randperm(n, generator=torch.Generator().manual_seed(
                    _stream_seed(s, stream)))[: min(g, n)]
                for s in self.seeds
            ]
        ).to(self.device)

    def _optimizer(self) -> torch.optim.Optimizer:
        o = self.cfg.optim
        named = list(self.model.named_parameters())
        decay = [p for n, p in named if o.decay_all or is_decayed(n)]
        rest = [p for n, p in named if not (o.decay_all or is_decayed(n))]
        groups = [{"params": decay, "weight_decay": o.weight_decay}]
        if rest:
            groups.append({"params": rest, "weight_decay": 0.0})
        kind = OPTIMIZERS[o.optimizer]
        if self.device.type == "cuda":
            # One fused kernel per parameter group, step counts on the device: a CUDA graph can
            # replay it (capturable), and eager and graph runs do the same arithmetic.
            return kind(groups, lr=o.lr, betas=o.betas, eps=o.eps, fused=True, capturable=True)
        # foreach: one kernel per op over all parameters instead of a Python loop.
        return kind(groups, lr=o.lr, betas=o.betas, eps=o.eps, foreach=True)

    # ---- one step -----------------------------------------------------------------------

    def _batch(self) -> tuple[Tensor, Tensor]:
        bs = self.cfg.optim.batch_size
        n = self.train_x.shape[1]
        if bs is None or bs >= n:
            return self.train_x, self.train_y
        idx = torch.stack(
            [torch.randperm(n, generator=g, device=self.device)[:bs] for g in self.gens]
        )
        return take(self.train_x, idx), take(self.train_y, idx)

    def _train_step(self, lam: float) -> None:
        """One step: replayed from a CUDA graph where one is used (after the learning-rate
        warm-up, whose changing lr a graph would not see), else eagerly."""
        if self.graphed is not None and self.step > self.cfg.optim.warmup_steps + 1:
            self.graphed(lam)
        else:
            self._step_body(lam, lam > 0)

    def _step_body(self, lam: float | Tensor, penalized: bool) -> None:
        """The step itself (eager, or being captured: then `lam` is a device scalar)."""
        x, y = self._batch()
        hidden: list[Tensor] | None = [] if penalized else None
        logits = self.model(x, hidden=hidden)
        per = per_example_loss(logits, y, self.cfg.optim.loss)
        loss = per.mean(1).sum()  # sum over members: independent gradients
        if hidden:
            penalty = geomdr_loss(hidden, self.cfg.geomdr, self.geo_gens, self.warm)
            loss = loss + lam * penalty.sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self._shape_gradients()
        self.opt.step()

    def _shape_gradients(self) -> None:
        """Grokfast, then the perpendicular gradient (the order is explained in accelerators)."""
        params = list(self.model.parameters())
        self.grad_filter.apply_(params)
        if self.cfg.optim.perpendicular_grad:
            perpendicular_grad_(params)

    def _set_lr(self, step: int) -> None:
        w = self.cfg.optim.warmup_steps
        if w and step <= w + 1:
            for group in self.opt.param_groups:
                group["lr"] = self.cfg.optim.lr * min(1.0, step / w)

    # ---- evaluation ---------------------------------------------------------------------

    def _evaluate(self, step: int, lam: float) -> tuple[list[dict], list[dict]]:
        """metrics/ and geometry/ rows of the active members at this step."""
        measures = evaluation.measure(self.model, self.cfg, (self.train_x, self.train_y),
                                      (self.test_x, self.test_y),
                                      (self.geo_idx, self.geo_test_idx))
        host = evaluation.to_host(measures)  # the one host sync of this evaluation
        common = {"wall_time": self.elapsed + time.perf_counter() - self._t0,
                  "lr": self.opt.param_groups[0]["lr"], "geomdr_lambda": lam}
        metrics, geometry = evaluation.rows(
            host, [self.run_ids[m] for m in self.active], step, common)
        if not self.ended:
            return metrics, geometry
        gone = {self.run_ids[m] for m in self.ended}  # rows of members that ended are not kept
        return ([r for r in metrics if r["run_id"] not in gone],
                [r for r in geometry if r["run_id"] not in gone])

    # ---- run ends, stops, compaction ----------------------------------------------------

    def _finish(self, slot: int, status: str, report: EvalReport) -> None:
        m = self.active[slot]
        row = run_row(
            self.members[m], self.trackers[m], status, self.step,
            self.elapsed + time.perf_counter() - self._t0, self.extra,
        )
        self.done.append(row)
        report.finished.append(row)

    def request_stop(self, run_id: str, report: EvalReport) -> None:
        ended = {r["run_id"] for r in self.done}  # a run that ended at this eval keeps its row
        for slot, m in enumerate(self.active):
            if self.run_ids[m] == run_id and run_id not in ended:
                self._stops.add(run_id)
                self._finish(slot, "censored", report)

    def _running_slots(self) -> list[int]:
        return [s for s, m in enumerate(self.active) if m not in self.ended]

    def _retire(self, keep_slots: list[int]) -> None:
        """End the running members outside `keep_slots`.

        Eager steps drop them at once. A captured step would have to be re-captured at every
        drop, so ended members stay in the ensemble (their rows are no longer kept) until at
        most half the slots still run: at most log2(E) re-captures per run."""
        if self.graphed is None or 2 * len(keep_slots) <= len(self.active):
            self._compact(keep_slots)
            return
        self.ended |= {self.active[s] for s in self._running_slots() if s not in keep_slots}

    def interrupted_rows(self, status: str) -> list[dict[str, Any]]:
        """Run rows, with `status`, of the runs that have not ended: their events so far, and
        steps_run their last evaluated step (what their metrics/ rows show)."""
        ended = {r["run_id"] for r in self.done}
        wall = self.elapsed + time.perf_counter() - getattr(self, "_t0", time.perf_counter())
        return [
            run_row(self.members[m], self.trackers[m], status,
                    int(self.trackers[m].last.get("step", 0)), wall, self.extra)
            for m in self.active if self.run_ids[m] not in ended
        ]

    def _compact(self, keep_slots: list[int]) -> None:
        """Drop every member outside `keep_slots` from the ensemble (parameters, optimizer
        state, data)."""
        self.ended -= {self.active[s] for s in range(len(self.active)) if s not in keep_slots}
        if len(keep_slots) == len(self.active):
            return
        if self.graphed is not None:
            self.graphed.reset()  # the graph captured the tensors replaced below
        idx = torch.tensor(keep_slots, dtype=torch.long, device=self.device)
        for p in self.model.parameters():
            p.data = p.data.index_select(0, idx)
            for k, v in self.opt.state.get(p, {}).items():
                if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == len(self.active):
                    self.opt.state[p][k] = v.index_select(0, idx)
        for name in ("train_x", "train_y", "test_x", "test_y", "geo_idx", "geo_test_idx"):
            setattr(self, name, getattr(self, name).index_select(0, idx))
        self.grad_filter.select(idx)
        if self.warm is not None:
            self.warm.select(idx)
        self.gens = [self.gens[s] for s in keep_slots]
        self.geo_gens = [self.geo_gens[s] for s in keep_slots]
        self.active = [self.active[s] for s in keep_slots]

    # ---- checkpoints --------------------------------------------------------------------

    def save_checkpoint(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        state = {
            "version": CHECKPOINT_VERSION, "step": self.step, "active": self.active,
            "ended": sorted(self.ended),
            "run_ids": self.run_ids,
            "model": self.model.state_dict(), "opt": self.opt.state_dict(),
            "gens": [g.get_state() for g in self.gens],
            "geo_gens": [g.get_state() for g in self.geo_gens],
            "trackers": [t.state() for t in self.trackers], "done": self.done,
            "grokfast": self.grad_filter.state(),
            "geomdr_subspace": None if self.warm is None else self.warm.state(),
            "elapsed": self.elapsed + time.perf_counter() - self._t0,
        }
        tmp = path / f".{CHECKPOINT_FILE}.tmp"
        # Owner-only (0600): a checkpoint is read back on resume and holds the whole run.
        tmp.unlink(missing_ok=True)  # a crashed save's leftover would keep its own mode
        with critical():
            with os.fdopen(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "wb") as f:
                torch.save(state, f)
            os.replace(tmp, path / CHECKPOINT_FILE)

    def load_checkpoint(self, path: Path) -> None:
        """Restore the state written by save_checkpoint (CheckpointError if it is not one).

        ``weights_only=True``: the state is plain tensors, dicts, lists, numbers and strings, so
        nothing else is unpickled (a crafted file cannot run code on resume)."""
        file = path / CHECKPOINT_FILE
        try:
            state = torch.load(file, map_location=self.device, weights_only=True)
        except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
            raise CheckpointError(f"{file}: not a sweepgrok checkpoint: {_why(err)}") from None
        if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"{file}: not a sweepgrok checkpoint of this version")
        if state.get("run_ids") != self.run_ids:
            raise CheckpointError(f"checkpoint {path} belongs to runs {state.get('run_ids')}")
        try:
            self._restore(path, state)
        except CheckpointError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError, RuntimeError, IndexError) as err:
            # A file of this version whose parts are not what save_checkpoint writes (edited,
            # or written by a tampered build): refused like a damaged one, not a traceback.
            raise CheckpointError(
                f"{file}: not a sweepgrok checkpoint of this version: "
                f"{type(err).__name__}: {_why(err)}") from None

    def _restore(self, path: Path, state: dict[str, Any]) -> None:
        """Every part of a loaded checkpoint into this trainer (load_checkpoint checks first)."""
        self._compact([self.active.index(m) for m in state["active"]])
        self.ended = set(state.get("ended", []))  # none before lazy compaction existed
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        # A generator's state is a host ByteTensor, a CUDA generator's too: map_location moved
        # it to the device with the weights, and set_state refuses it there.
        for gens, states in ((self.gens, state["gens"]), (self.geo_gens, state["geo_gens"])):
            for g, s in zip(gens, states, strict=True):
                g.set_state(s.cpu())
        self._load_filter(path, state.get("grokfast"))
        if self.warm is not None:  # the warm GeomDR bases (nothing to load for eigh)
            self._load_part(path, self.warm, state.get("geomdr_subspace"))
        self.trackers = [RunTracker.from_state(t) for t in state["trackers"]]
        self.step, self.done, self.elapsed = state["step"], state["done"], state["elapsed"]
        # A checkpoint taken in on_eval holds the runs that ended at that evaluation as active
        # (retirement follows on_eval): they ended, so they train no further; retired as the
        # uninterrupted run retired them there.
        ended = {r["run_id"] for r in self.done}
        self._retire([s for s in self._running_slots()
                      if self.run_ids[self.active[s]] not in ended])

    def _load_filter(self, path: Path, state: Any) -> None:
        """The Grokfast state; a checkpoint without one predates the filter (kind none then)."""
        if state is None and self.cfg.grokfast.kind == "none":
            return
        self._load_part(path, self.grad_filter, state)

    @staticmethod
    def _load_part(path: Path, part: GradFilter | WarmSubspaces, state: Any) -> None:
        """`part.load_state(state)`; a state it refuses (ValueError) is a CheckpointError."""
        try:
            part.load_state(state)
        except ValueError as err:
            raise CheckpointError(f"checkpoint {path}: {err}") from None

    # ---- the loop -----------------------------------------------------------------------

    def run(self, sink: Sink | None, on_eval: EvalCallback | None) -> list[dict[str, Any]]:
        """Train to the budget (or until every run ended); the run rows of every member."""
        t = self.cfg.train
        schedule = eval_steps(t.max_steps, t.eval_every, t.early_evals)
        pending = [s for s in schedule if s > self.step] if self.step else schedule
        self._t0 = time.perf_counter()
        for target in pending:
            while self.step < target:
                self.step += 1
                self._set_lr(self.step)
                self._train_step(geomdr_lambda(self.step, self.cfg.geomdr))
            self._eval_and_report(sink, on_eval)
            if not self.active:
                break
        if sink is not None:
            sink.flush()
        return self.done

    def _eval_and_report(self, sink: Sink | None, on_eval: EvalCallback | None) -> None:
        lam = geomdr_lambda(self.step, self.cfg.geomdr)
        metrics, geometry = self._evaluate(self.step, lam)
        report = EvalReport(self.step, metrics, geometry, [], self)
        keep = []
        for slot, row in zip(self._running_slots(), metrics, strict=True):
            tr = self.trackers[self.active[slot]]
            tr.update(self.step, row["train_acc"], row["test_acc"], row.get("deff"))
            diverged = not math.isfinite(row["train_loss"])
            status = end_status(tr, self.step, self.cfg.train.max_steps, diverged,
                                self.cfg.train.stop_after_grok)
            if status:
                self._finish(slot, status, report)
            else:
                keep.append(slot)
        if sink is not None:
            sink.write_metrics(metrics)
            sink.write_geometry(geometry)
        if on_eval is not None:
            on_eval(report)
        keep = [s for s in keep if self.run_ids[self.active[s]] not in self._stops]
        if sink is not None:
            for row in report.finished:
                sink.write_run(row)
        self._retire(keep)


def _member_config(cfg: Config, seed: int) -> Config:
    """The single-seed config of a member, with the split seed it actually used."""
    member = cfg.member(seed)
    return update(member, {"task.data_seed": split_seed_for(cfg.task, seed)})


def train(
    cfg: Config,
    sink: Sink | None = None,
    *,
    run_ids: Sequence[str] | None = None,
    sweep: str = "",
    on_eval: EvalCallback | None = None,
    resume_from: str | Path | None = None,
    run_extra: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Train every seed of `cfg` (one run each) and return their run rows.

    Rows go to `sink` (metrics and geometry at each evaluation, the run row when a run ends);
    `on_eval` sees each EvalReport (progress, checkpoints, external stops). `resume_from` is a
    directory written by EvalReport.save_checkpoint: the run continues bit-identically from
    there. Process-wide settings (threads, deterministic kernels) are the caller's:
    ``process.configure_process``.
    """
    trainer = Trainer(cfg, run_ids, sweep, run_extra)
    if resume_from is not None:
        trainer.load_checkpoint(Path(resume_from))
    return trainer.run(sink, on_eval)
