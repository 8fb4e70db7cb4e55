"""Golden references of training numerics: a few short configs, every logged value.

    .venv/bin/python tests/golden.py            # print every config's rows as JSON
    .venv/bin/python tests/golden.py --write    # regenerate tests/data/golden/<name>.json

Each config trains a few dozen steps on the CPU with 1 thread and deterministic kernels, in a
process of its own (a fresh torch: no thread count or seed left by another caller), with
torch's CPU kernels and MKL held at AVX2 (ENV): torch picks its kernels by the CPU's vector
width, and an AVX-512 kernel rounds differently from an AVX2 one (measured here: the sphere
config's train_loss differs in the last digit by step 5), so an unpinned reference would hold
only on machines like the one that wrote it. The rows
kept: every metrics/ and geometry/ column and every outcome column of the run row, all but
the wall-clock times and the provenance (host, versions, commit), which differ by machine.
tests/train/test_golden.py compares them to the committed references (`same`: floats within
REL_TOL, everything else exact).

Changing training numerics is a deliberate commit: regenerate with --write, and say in
CHANGELOG.md what changed and why in the same commit.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from conftest import tiny_config

ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "OMP_NUM_THREADS": "1"}
"""Set before torch is imported (tests/train/test_golden.py runs this file with them)."""
REFERENCES = Path(__file__).resolve().parent / "data" / "golden"
TINY: dict[str, Any] = tiny_config(
    {
        "task.p": 23,
        "task.train_fraction": 0.5,
        "train.max_steps": 40,
        "train.eval_every": 10,
        "train.seeds": [1, 2],
        "train.stop_after_grok": False,
        "train.threads": 1,
        "train.deterministic": True,
    },
    # The references were written with these at their defaults (and record the config as
    # this dict, which test_golden compares key for key).
    defaults=("task.name", "train.early_evals"),
)
CONFIGS: dict[str, dict[str, Any]] = {
    "transformer": {},
    "sphere": {"model.norm": "sphere", "optim.weight_decay": 0.0},
    "mlp_geomdr_subspace": {
        "model.arch": "mlp",
        "model.n_layers": 2,
        "optim.batch_size": 64,
        "geomdr.enabled": True,
        "geomdr.solver": "subspace",
        "geomdr.target_dim": 4,
        "geomdr.start_step": 5,
        "geomdr.ramp_steps": 10,
        "geomdr.subsample": 0.5,
    },
    "grokfast_ema": {"grokfast.kind": "ema", "optim.lr": 3e-3},
    "stablemax_perpendicular": {
        "optim.loss": "stablemax",
        "optim.perpendicular_grad": True,
        "optim.weight_decay": 0.0,
    },
}
"""name -> keys over TINY: a plain Transformer, the sphere, the MLP with minibatches and the
warm-started GeomDR solver on half the batch, Grokfast's EMA filter, StableMax with the
perpendicular gradient."""
NOT_NUMERICS = {
    "wall_time",
    "finished_at",
    "host",
    "device",
    "node_id",
    "trial_id",
    "sweep",
    "sweepgrok_version",
    "git_commit",
    "git_dirty",
    "torch_version",
    "torch_build",
    "device_name",
    "ray_version",
    "error",
}
"""Columns of the rows that are not training numerics: clocks and provenance."""


REL_TOL = 1e-5
"""Largest relative difference between a logged float and its reference: across CPU models
the evaluation-time measurements (rho, the Fourier and attention-entropy columns) differed by
up to 4e-6 relative with the same code and pin (2026-12-05, another Xeon)."""


def same(got: Any, want: Any) -> bool:
    """Equal, or floats (or lists of them) within REL_TOL of each other (NaN equals NaN)."""
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(got, float) and isinstance(want, float):
        if math.isnan(got) or math.isnan(want):
            return math.isnan(got) and math.isnan(want)
        return math.isclose(got, want, rel_tol=REL_TOL)
    return bool(got == want)


def first_difference(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> str:
    """Where two lists of rows first differ (`same`), or "" where they do not."""
    if len(got) != len(want):
        return f"{len(got)} rows, the reference has {len(want)}"
    for g, w in zip(got, want, strict=True):
        for key in sorted(set(g) | set(w)):
            if not same(g.get(key, "<absent>"), w.get(key, "<absent>")):
                where = {k: g.get(k) for k in ("run_id", "step", "layer") if k in g}
                return f"{where} {key}: {g.get(key, '<absent>')!r} != {w.get(key, '<absent>')!r}"
    return ""


class Rows:
    """A sink that keeps every row in memory (the trainer's Sink protocol)."""

    def __init__(self) -> None:
        self.kept: dict[str, list[dict[str, Any]]] = {"metrics": [], "geometry": [], "runs": []}

    def write_metrics(self, rows: Any) -> None:
        self.kept["metrics"] += [dict(r) for r in rows]

    def write_geometry(self, rows: Any) -> None:
        self.kept["geometry"] += [dict(r) for r in rows]

    def write_run(self, row: Any) -> None:
        self.kept["runs"].append(dict(row))

    def flush(self) -> None:
        pass


def plain(value: Any) -> Any:
    """A JSON value compared with == (NaN and infinities as text; numpy scalars as Python)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def numerics(rows: list[dict[str, Any]], skip: set[str]) -> list[dict[str, Any]]:
    return [{k: plain(v) for k, v in sorted(r.items()) if k not in skip} for r in rows]


def run(overrides: dict[str, Any]) -> dict[str, Any]:
    """Train TINY + overrides in this process; the rows that are training numerics."""
    from sweepgrok.config.trial import all_keys, from_flat
    from sweepgrok.train.process import configure_process
    from sweepgrok.train.trainer import train

    cfg = from_flat({**TINY, **overrides}, "golden")
    configure_process(cfg.train)
    sink = Rows()
    train(cfg, sink, run_ids=[f"s{s}" for s in cfg.train.seed_list])
    skip = NOT_NUMERICS | set(all_keys())
    return {kind: numerics(rows, skip) for kind, rows in sink.kept.items()}


def machine() -> dict[str, str]:
    """What the references depend on besides the code: torch's version and kernel width."""
    import torch

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def main(argv: list[str]) -> None:
    if "--write" in argv and any(os.environ.get(k) != v for k, v in ENV.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **ENV})
    names = [a for a in argv if not a.startswith("--")] or list(CONFIGS)
    out: dict[str, Any] = {name: run(CONFIGS[name]) for name in names}
    if "--write" in argv:
        REFERENCES.mkdir(parents=True, exist_ok=True)
        for name, rows in out.items():
            config = {**TINY, **CONFIGS[name]}
            text = json.dumps({"config": config, "machine": machine(), **rows}, sort_keys=True)
            (REFERENCES / f"{name}.json").write_text(text + "\n")
            print(f"wrote {REFERENCES / name}.json")
    else:
        print(json.dumps({"machine": machine(), "rows": out}))


if __name__ == "__main__":
    main(sys.argv[1:])
