"""The shared trainer: one run, or several init seeds in lockstep as one batched model.

``train(cfg, sink, ...)`` knows nothing of Ray or Optuna: it reaches the world through a sink
(rows) and an ``on_eval`` callback (progress, checkpoints, external stops).

Loop habits: data resident on the device; no host sync inside a step (the only syncs are at
evaluations, one per evaluation); evaluation under ``torch.no_grad``; the last block computes
only the readout position. Members are independent: the loss is the sum of per-member mean
losses, AdamW is elementwise, so each member follows exactly the trajectory it would alone.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from sweepgrok import geometry as geo
from sweepgrok.config import Config, config_hash, update
from sweepgrok.events import RunTracker, end_status, run_row
from sweepgrok.models import build_model, is_decayed, keep_freed_memory
from sweepgrok.provenance import provenance
from sweepgrok.sink import Sink
from sweepgrok.tasks import make_split, split_seed_for

CHECKPOINT_FILE = "trainer.pt"
# Distinct streams per member so minibatch order and GeomDR subsets never share draws.
_BATCH_STREAM, _GEOMDR_STREAM, _GEOMETRY_STREAM = 1, 2, 3


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
        keep_freed_memory()  # process-wide malloc tuning: no page faults on per-step activations
        self.model = build_model(cfg, self.seeds).to(self.device)
        self.opt = self._optimizer()
        self.gens = [self._generator(s, _BATCH_STREAM) for s in self.seeds]
        self.geo_gens = [self._generator(s, _GEOMDR_STREAM) for s in self.seeds]
        t = cfg.train
        self.trackers = [
            RunTracker(rid, t.grok_threshold, t.fit_threshold, cfg.geometry.collapse_fraction)
            for rid in self.run_ids
        ]
        self.active = list(range(len(self.seeds)))  # member index of each ensemble slot
        self.step = 0
        self.elapsed = 0.0
        self.done: list[dict[str, Any]] = []
        self._stops: set[str] = set()
        self._zp = cfg.task.spec.cyclic

    # ---- set-up -------------------------------------------------------------------------

    def _generator(self, seed: int, stream: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(_stream_seed(seed, stream))

    def _load_data(self) -> None:
        splits = [make_split(self.cfg.task, split_seed_for(self.cfg.task, s)) for s in self.seeds]
        dev = self.device
        self.train_x = torch.stack([s.train_x for s in splits]).to(dev)  # (E, N, 3)
        self.train_y = torch.stack([s.train_y for s in splits]).to(dev)  # (E, N)
        self.test_x = torch.stack([s.test_x for s in splits]).to(dev)
        self.test_y = torch.stack([s.test_y for s in splits]).to(dev)
        n, g = self.train_x.shape[1], self.cfg.geometry.sample
        # Fixed, seeded subsample of training points on which geometry is measured.
        self.geo_idx = torch.stack(
            [
                torch.randperm(n, generator=torch.Generator().manual_seed(
                    _stream_seed(s, _GEOMETRY_STREAM)))[: min(g, n)]
                for s in self.seeds
            ]
        ).to(dev)

    def _optimizer(self) -> torch.optim.Optimizer:
        o = self.cfg.optim
        named = list(self.model.named_parameters())
        decay = [p for n, p in named if o.decay_all or is_decayed(n)]
        rest = [p for n, p in named if not (o.decay_all or is_decayed(n))]
        groups = [{"params": decay, "weight_decay": o.weight_decay}]
        if rest:
            groups.append({"params": rest, "weight_decay": 0.0})
        # foreach: one fused kernel per op over all parameters instead of a Python loop.
        return torch.optim.AdamW(groups, lr=o.lr, betas=o.betas, eps=o.eps, foreach=True)

    # ---- one step -----------------------------------------------------------------------

    def _batch(self) -> tuple[Tensor, Tensor]:
        bs = self.cfg.optim.batch_size
        n = self.train_x.shape[1]
        if bs is None or bs >= n:
            return self.train_x, self.train_y
        idx = torch.stack(
            [torch.randperm(n, generator=g, device=self.device)[:bs] for g in self.gens]
        )
        return _take(self.train_x, idx), _take(self.train_y, idx)

    def _penalty(self, hidden: list[Tensor]) -> Tensor:
        """GeomDR tail variance summed over the regularized layers: (E,)."""
        g = self.cfg.geomdr
        layers = g.layers if g.layers is not None else range(len(hidden))
        n = hidden[0].shape[1]
        idx = [geo.subsample_indices(n, g.subsample, gen, self.device) for gen in self.geo_gens]
        total = hidden[0].new_zeros(hidden[0].shape[0])
        for i in layers:
            h = hidden[i]
            if idx[0] is not None:
                h = _take(h, torch.stack([j for j in idx if j is not None]))
            total = total + geo.geomdr_penalty(_finite(h), g.target_dim)
        return total

    def _train_step(self, lam: float) -> None:
        x, y = self._batch()
        hidden: list[Tensor] | None = [] if lam > 0 else None
        logits = self.model(x, hidden=hidden)
        e, b, c = logits.shape
        per = F.cross_entropy(logits.reshape(e * b, c), y.reshape(-1), reduction="none")
        loss = per.view(e, b).mean(1).sum()  # sum over members: independent gradients
        if hidden:
            loss = loss + lam * self._penalty(hidden).sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def _set_lr(self, step: int) -> None:
        w = self.cfg.optim.warmup_steps
        if w and step <= w + 1:
            for group in self.opt.param_groups:
                group["lr"] = self.cfg.optim.lr * min(1.0, step / w)

    # ---- evaluation ---------------------------------------------------------------------

    @torch.no_grad()
    def _split_stats(self, x: Tensor, y: Tensor, hidden: list[Tensor] | None) -> list[Tensor]:
        logits = self.model(x, hidden=hidden)
        e, n, c = logits.shape
        loss = F.cross_entropy(logits.reshape(e * n, c), y.reshape(-1), reduction="none")
        acc = (logits.argmax(-1) == y).float().mean(1)
        return [loss.view(e, n).mean(1), acc]

    @torch.no_grad()
    def _evaluate(self, step: int, lam: float) -> tuple[list[dict], list[dict]]:
        hidden: list[Tensor] = []
        tr_loss, tr_acc = self._split_stats(self.train_x, self.train_y, hidden)
        te_loss, te_acc = self._split_stats(self.test_x, self.test_y, None)
        wnorm = torch.stack([p.pow(2).flatten(1).sum(1) for p in self.model.parameters()])
        wnorm = wnorm.sum(0).sqrt()
        cols = [tr_loss, tr_acc, te_loss, te_acc, wnorm]
        cols.append(self._penalty_eval(hidden))
        geo_cols = self._geometry(hidden)
        fourier = self._fourier()
        fracs = [fourier[0][0], fourier[1][0]] if fourier else []
        # One host sync per evaluation.
        values = torch.stack(cols + geo_cols + fracs).cpu()
        freqs = [f[1].cpu().tolist() for f in fourier] if fourier else None
        return self._rows(step, lam, values.tolist(), freqs, len(hidden))

    def _penalty_eval(self, hidden: list[Tensor]) -> Tensor:
        g = self.cfg.geomdr
        if not g.enabled:
            return torch.full_like(hidden[0][:, 0, 0], math.nan)
        layers = g.layers if g.layers is not None else range(len(hidden))
        total = sum((geo.geomdr_penalty(_finite(hidden[i]), g.target_dim) for i in layers),
                    torch.zeros_like(hidden[0][:, 0, 0]))
        return torch.where(_member_finite(hidden[-1]), total, math.nan)

    def _geometry(self, hidden: list[Tensor]) -> list[Tensor]:
        """Per layer: D_eff, rho, top-eigenvalue fraction on the fixed subsample; 3L x (E,)."""
        if not self.cfg.geometry.enabled:
            return []
        out: list[Tensor] = []
        for h in hidden:
            z = _take(h, self.geo_idx)
            ok = _member_finite(z)
            z = _finite(z)
            eigs = geo.covariance_spectrum(z.double())
            vals = [
                geo.participation_ratio(eigs).to(h.dtype),
                geo.knn_distance(z, self.cfg.geometry.knn_k),
                (eigs[..., 0] / eigs.sum(-1).clamp_min(1e-30)).to(h.dtype),
            ]
            out.extend(torch.where(ok, v, math.nan) for v in vals)
        return out

    def _fourier(self) -> list[tuple[Tensor, Tensor]] | None:
        """Fourier concentration over the vocabulary (token embedding) and over the classes
        (unembedding rows), Z_p tasks only."""
        if not (self.cfg.geometry.enabled and self._zp):
            return None
        top = self.cfg.geometry.fourier_top
        return [geo.fourier_concentration(w, top)
                for w in (self.model.token_embedding, self.model.class_unembedding)]

    def _rows(
        self, step: int, lam: float, v: list[list[float]], freqs: Any, n_layers: int
    ) -> tuple[list[dict], list[dict]]:
        metrics, geometry = [], []
        geo_on = self.cfg.geometry.enabled
        for slot, m in enumerate(self.active):
            rid = self.run_ids[m]
            row = {
                "run_id": rid, "step": step, "train_loss": v[0][slot], "train_acc": v[1][slot],
                "test_loss": v[2][slot], "test_acc": v[3][slot], "weight_norm": v[4][slot],
                "wall_time": self.elapsed + time.perf_counter() - self._t0,
                "lr": self.opt.param_groups[0]["lr"], "geomdr_lambda": lam,
                "geomdr_loss": _finite_or_none(v[5][slot]),
            }
            if geo_on:
                base = 6
                for layer in range(n_layers):
                    d, r, t = (v[base + 3 * layer + k][slot] for k in range(3))
                    geometry.append({"run_id": rid, "step": step, "layer": layer,
                                     "deff": d, "rho": r, "top_eig_frac": t})
                row["deff"], row["rho"] = geometry[-1]["deff"], geometry[-1]["rho"]
                if freqs is not None:
                    row["fourier_frac"] = v[base + 3 * n_layers][slot]
                    row["fourier_freqs"] = ",".join(str(f) for f in freqs[0][slot])
                    row["fourier_unembed_frac"] = v[base + 3 * n_layers + 1][slot]
                    row["fourier_unembed_freqs"] = ",".join(str(f) for f in freqs[1][slot])
            metrics.append(row)
        return metrics, geometry

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

    def _compact(self, keep_slots: list[int]) -> None:
        """Drop ended members from the ensemble (parameters, optimizer state, data)."""
        if len(keep_slots) == len(self.active):
            return
        idx = torch.tensor(keep_slots, dtype=torch.long, device=self.device)
        for p in self.model.parameters():
            p.data = p.data.index_select(0, idx)
            for k, v in self.opt.state.get(p, {}).items():
                if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] == len(self.active):
                    self.opt.state[p][k] = v.index_select(0, idx)
        for name in ("train_x", "train_y", "test_x", "test_y", "geo_idx"):
            setattr(self, name, getattr(self, name).index_select(0, idx))
        self.gens = [self.gens[s] for s in keep_slots]
        self.geo_gens = [self.geo_gens[s] for s in keep_slots]
        self.active = [self.active[s] for s in keep_slots]

    # ---- checkpoints --------------------------------------------------------------------

    def save_checkpoint(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        state = {
            "version": 1, "step": self.step, "active": self.active, "run_ids": self.run_ids,
            "model": self.model.state_dict(), "opt": self.opt.state_dict(),
            "gens": [g.get_state() for g in self.gens],
            "geo_gens": [g.get_state() for g in self.geo_gens],
            "trackers": [t.state() for t in self.trackers], "done": self.done,
            "elapsed": self.elapsed + time.perf_counter() - self._t0,
        }
        tmp = path / f".{CHECKPOINT_FILE}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, path / CHECKPOINT_FILE)

    def load_checkpoint(self, path: Path) -> None:
        state = torch.load(path / CHECKPOINT_FILE, map_location=self.device, weights_only=False)
        if state["run_ids"] != self.run_ids:
            raise ValueError(f"checkpoint {path} belongs to runs {state['run_ids']}")
        self._compact([self.active.index(m) for m in state["active"]])
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        for g, s in zip(self.gens, state["gens"], strict=True):
            g.set_state(s)
        for g, s in zip(self.geo_gens, state["geo_gens"], strict=True):
            g.set_state(s)
        self.trackers = [RunTracker.from_state(t) for t in state["trackers"]]
        self.step, self.done, self.elapsed = state["step"], state["done"], state["elapsed"]

    # ---- the loop -----------------------------------------------------------------------

    def run(
        self,
        sink: Sink | None,
        on_eval: Callable[[EvalReport], None] | None,
        progress: Callable[[EvalReport, Trainer], None] | None = None,
    ) -> list[dict[str, Any]]:
        t = self.cfg.train
        if t.threads:
            torch.set_num_threads(t.threads)
        # warn_only: on CUDA, ops without a deterministic kernel warn instead of raising.
        torch.use_deterministic_algorithms(t.deterministic, warn_only=True)
        schedule = eval_steps(t.max_steps, t.eval_every, t.early_evals)
        pending = [s for s in schedule if s > self.step] if self.step else schedule
        self._t0 = time.perf_counter()
        for target in pending:
            while self.step < target:
                self.step += 1
                self._set_lr(self.step)
                self._train_step(geo.geomdr_lambda(self.step, self.cfg.geomdr))
            report = self._eval_and_report(sink, on_eval)
            if progress:
                progress(report, self)
            if not self.active:
                break
        if sink is not None:
            sink.flush()
        return self.done

    def _eval_and_report(
        self, sink: Sink | None, on_eval: Callable[[EvalReport], None] | None
    ) -> EvalReport:
        lam = geo.geomdr_lambda(self.step, self.cfg.geomdr)
        metrics, geometry = self._evaluate(self.step, lam)
        report = EvalReport(self.step, metrics, geometry, [], self)
        keep = []
        for slot, (m, row) in enumerate(zip(self.active, metrics, strict=True)):
            tr = self.trackers[m]
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
        self._compact(keep)
        return report


def _take(t: Tensor, idx: Tensor) -> Tensor:
    """Per-member rows: t (E, N, ...) and idx (E, B) -> (E, B, ...)."""
    view = idx.view(*idx.shape, *([1] * (t.dim() - 2))).expand(*idx.shape, *t.shape[2:])
    return t.gather(1, view)


def _member_finite(z: Tensor) -> Tensor:
    """(E, ...) -> (E,) bool: the member's tensor is entirely finite."""
    return torch.isfinite(z).flatten(1).all(1)


def _finite(z: Tensor) -> Tensor:
    # A diverged member's NaNs would make eigh raise for the whole batch: zero them (the
    # member is recorded as NaN / diverged at this evaluation anyway).
    return torch.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


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
    on_eval: Callable[[EvalReport], None] | None = None,
    resume_from: str | Path | None = None,
    run_extra: Mapping[str, Any] | None = None,
    progress: Callable[[EvalReport, Trainer], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every seed of `cfg` (one run each) and return their run rows.

    Rows go to `sink` (metrics and geometry at each evaluation, the run row when a run ends);
    `on_eval` sees each EvalReport (checkpoints, external stops). `resume_from` is a directory
    written by EvalReport.save_checkpoint: the run continues bit-identically from there.
    """
    trainer = Trainer(cfg, run_ids, sweep, run_extra)
    if resume_from is not None:
        trainer.load_checkpoint(Path(resume_from))
    return trainer.run(sink, on_eval, progress)
