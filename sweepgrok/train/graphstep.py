"""The training step replayed as a captured CUDA graph (``train.cuda_graph``).

A paper-size step launches a few hundred small kernels; on a GPU the Python and launch overhead
of those, not the arithmetic, sets the step time. Captured once, the whole step (forward, loss,
backward, Grokfast, perpendicular gradient, AdamW) replays as one graph launch.

How it stays the same computation as the eager step:

- the graph runs the trainer's own step function (``body``), captured after a few eager steps
  of the same kind (lazy initialisations: optimizer state, Grokfast history, GeomDR bases,
  cuBLAS handles) run on a side stream, as PyTorch's capture recipe asks;
- every tensor the step reads or writes keeps its memory between replays: parameters and
  optimizer state are updated in place (AdamW ``capturable``, which the trainer uses on every
  CUDA run so that eager and graph runs do the same arithmetic), the GeomDR bases are updated in
  place (``WarmSubspaces.refine``), gradients live in the graph's memory pool;
- the one value that changes between steps, the GeomDR weight lambda(t), is a device scalar
  filled before each replay; the learning rate changes only during optim.warmup_steps, which run
  eagerly;
- a step kind (plain before GeomDR's t_s, penalized after) that draws fresh random numbers or
  needs a host sync is not captured: it runs eagerly and the reason is logged once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import Tensor

from sweepgrok.config.trial import Config
from sweepgrok.train.accelerators import GradFilter

log = logging.getLogger(__name__)

WARMUP_STEPS = 2
"""Eager steps of a kind, on a side stream, before it is captured (PyTorch's recipe: lazy
initialisations must not happen inside a capture)."""

StepBody = Callable[[float | Tensor, bool], None]
"""One training step given lambda(t) (a float when eager, a device scalar when captured) and
whether it is penalized (lambda(t) > 0, decided on the host: a captured step cannot ask)."""


def uses_graph(cfg: Config, device: torch.device) -> bool:
    """Whether train.cuda_graph asks for captured steps on `device` (auto and on: CUDA only)."""
    return cfg.train.cuda_graph != "off" and device.type == "cuda"


def capture_blockers(cfg: Config, n_train: int, penalized: bool) -> list[str]:
    """Why a step of this kind cannot be captured (empty: it can).

    `penalized`: the step adds the GeomDR penalty (lambda(t) > 0). Each reason is a fresh draw
    per step (a captured graph would replay the same draw) or a host sync (not allowed while
    capturing)."""
    why = []
    bs = cfg.optim.batch_size
    if bs is not None and bs < n_train:
        why.append("optim.batch_size below the training set draws a fresh minibatch each step")
    if cfg.grokfast.kind == "ma":
        why.append("grokfast.kind ma writes a different ring slot each step")
    g = cfg.geomdr
    if penalized and g.subsample < 1.0:
        why.append("geomdr.subsample below 1 draws a fresh subset of rows each step")
    if penalized and g.solver == "eigh" and g.penalty != "trace":
        why.append("geomdr.solver eigh checks its convergence on the host each step "
                   "(solver subspace is captured)")
    return why


class GraphedStep:
    """Runs the trainer's step `body` as a replayed CUDA graph where it can, eagerly elsewhere.

    One graph at a time: lambda(t) only grows, so a run captures its plain step, then (from
    GeomDR's t_s on) its penalized step. ``reset()`` drops the graph when the tensors it
    captured are replaced (the trainer compacting its ensemble)."""

    def __init__(self, body: StepBody, cfg: Config, n_train: int, device: torch.device,
                 grad_filter: GradFilter, zero_grad: Callable[[], None]) -> None:
        self.body, self.cfg, self.n_train = body, cfg, n_train
        self.grad_filter, self.zero_grad = grad_filter, zero_grad
        self.lam = torch.zeros((), device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.kind: bool | None = None  # the captured graph's kind (penalized or not)
        self.eager_steps = {False: 0, True: 0}  # eager steps of each kind since the last reset
        self.refused: dict[bool, str] = {}  # kind -> why it runs eagerly (said once)
        self.captures = 0
        """Graphs captured so far (compaction re-captures; a bounded number of times)."""
        self.replays = 0

    def __call__(self, lam: float) -> None:
        kind = lam > 0
        if self.graph is not None and self.kind == kind:
            self._replay(lam, counted=True)
            return
        if self._refused(kind) or self.eager_steps[kind] < WARMUP_STEPS:
            self._eager(lam, side_stream=kind not in self.refused)
            return
        if self._capture(kind):
            self._replay(lam, counted=False)  # apply_ ran (once) while capturing
        else:
            self._eager(lam, side_stream=False)

    def reset(self) -> None:
        """Forget the graph (its tensors were replaced); the next step of a kind re-captures
        after one eager step."""
        self.graph = self.kind = None
        self.eager_steps = dict.fromkeys(self.eager_steps, WARMUP_STEPS - 1)

    def _refused(self, kind: bool) -> bool:
        if kind in self.refused:
            return True
        why = capture_blockers(self.cfg, self.n_train, kind)
        if why:
            self._refuse(kind, "; ".join(why))
        return bool(why)

    def _refuse(self, kind: bool, why: str) -> None:
        self.refused[kind] = why
        step = "GeomDR-penalized" if kind else "plain"
        log.warning("train.cuda_graph: the %s training step runs eagerly: %s", step, why)

    def _eager(self, lam: float, side_stream: bool) -> None:
        self.eager_steps[lam > 0] += 1
        if not side_stream:
            self.body(lam, lam > 0)
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.body(lam, lam > 0)
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self, kind: bool) -> bool:
        """Capture the step of `kind` (nothing runs); False (and eager from now on) if torch
        refuses an operation of it while capturing."""
        self.graph = self.kind = None  # free the old graph's pool before the new one
        seen = self.grad_filter.seen
        self.zero_grad()  # gradients are allocated in the graph's pool, rewritten per replay
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.body(self.lam, kind)
        except RuntimeError as err:
            self.grad_filter.seen = seen  # the Python side of a capture that did not happen
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            self._refuse(kind, f"capture failed: {first}")
            return False
        self.graph, self.kind = graph, kind
        self.captures += 1
        return True

    def _replay(self, lam: float, counted: bool) -> None:
        assert self.graph is not None
        self.lam.fill_(lam)
        self.graph.replay()
        self.replays += 1
        if counted:
            self.grad_filter.count_replayed_step()
