"""Record the run ids (config_hash) this version gives a set of configs: every trial file in
search_spaces/, the members of the first trials of every grid there and of every reproduction
study's grid (analysis/reproduction/<name>/<name>.yaml), and one non-default value per key.

    .venv/bin/python tests/data/make_run_ids.py

Written once per version to tests/data/run_ids_v<version>.json; tests/robustness/test_run_ids.py
checks that later versions give every config recorded there the same id. Each entry is the config's
non-default keys (JSON values) and its id.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from sweepgrok.config.grid_file import load_grid
from sweepgrok.config.trial import Config, config_hash, flatten, from_flat, load_config

HERE = Path(__file__).resolve().parent
SPACES = HERE.parent.parent / "search_spaces"
STUDIES = HERE.parent.parent / "analysis" / "reproduction"
DEFAULTS = flatten(Config())
# One non-default value per key that a config may take alone (next to the defaults).
ONE_CHANGE: dict[str, Any] = {
    "task.name": "mul",
    "task.p": 97,
    "task.train_fraction": 0.5,
    "task.data_seed": 3,
    "task.split_follows_seed": True,
    "model.arch": "mlp",
    "model.n_layers": 2,
    "model.d_model": 64,
    "model.n_heads": 8,
    "model.d_mlp": 256,
    "model.norm": "sphere",
    "model.attention": "uniform",
    "model.unembed": "cosine",
    "model.temperature": 5.0,
    "optim.lr": 3e-3,
    "optim.weight_decay": 0.0,
    "optim.betas": [0.9, 0.99],
    "optim.eps": 1e-6,
    "optim.batch_size": 512,
    "optim.warmup_steps": 10,
    "optim.decay_all": False,
    "optim.loss": "stablemax",
    "optim.perpendicular_grad": True,
    "geomdr.enabled": True,
    "geomdr.target_dim": 8,
    "geomdr.penalty": "trace",
    "geomdr.solver": "subspace",
    "geomdr.start_step": 0,
    "geomdr.lambda_max": 0.5,
    "geomdr.ramp_steps": 0,
    "geomdr.subsample": 0.5,
    "geomdr.layers": [0],
    "grokfast.kind": "ema",
    "grokfast.alpha": 0.9,
    "grokfast.lam": 5.0,
    "grokfast.window": 10,
    "geometry.enabled": False,
    "geometry.knn_k": 5,
    "geometry.sample": 256,
    "geometry.collapse_fraction": 0.25,
    "geometry.fourier_top": 4,
    "train.max_steps": 500,
    "train.eval_every": 10,
    "train.early_evals": False,
    "train.seed": 7,
    "train.seeds": [1, 2],
    "train.fit_threshold": 0.95,
    "train.grok_threshold": 0.95,
    "train.stop_after_grok": False,
    "train.checkpoint_every": 3,
    "train.device": "cpu",
    "train.threads": 1,
    "train.deterministic": False,
}


def non_default(cfg: Config) -> dict[str, Any]:
    flat = json.loads(json.dumps(flatten(cfg)))
    return {k: v for k, v in flat.items() if v != json.loads(json.dumps(DEFAULTS[k]))}


def configs() -> list[Config]:
    out = [Config()]
    for key, value in ONE_CHANGE.items():
        # geomdr.layers [0] and a one-layer model; knn_k 5 needs no more points than the default
        out.append(from_flat({key: value}, "ONE_CHANGE"))
    for path in sorted(SPACES.glob("trials/*.yaml")):
        out.append(load_config(path))
    for path in sorted([*SPACES.glob("*/*.yaml"), *STUDIES.glob("*/*.yaml")]):
        if path.name.startswith("trial_"):
            continue
        try:
            spec = load_grid(path)
        except Exception:  # a search file, not a grid
            continue
        for trial in spec.trials[:4]:
            cfg = from_flat(trial.flat, str(path))
            out += [cfg.member(s) for s in cfg.train.seed_list] + [cfg]
    return out


def main() -> None:
    seen: dict[str, Any] = {}
    for cfg in configs():
        seen[config_hash(cfg)] = non_default(cfg)
    rows = [{"config": cfg, "run_id": rid} for rid, cfg in seen.items()]
    target = HERE / f"run_ids_v{version('sweepgrok')}.json"
    lines = ",\n".join(json.dumps(row, sort_keys=True) for row in rows)
    target.write_text(f"[\n{lines}\n]\n")
    print(f"wrote {len(rows)} ids to {target}")


if __name__ == "__main__":
    main()
