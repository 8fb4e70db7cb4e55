"""`sweepgrok validate FILE.yaml`: check a trial, grid or search file without running anything.

Exit 0 with a one-line summary ("grid quickstart: 8 trials"), or 2 with the message naming the
file, the key and the allowed values. What depends on this machine (``train.device: cuda``
without a CUDA device) is a warning on stderr, not an error: the file may be meant for a GPU
machine, where ``train`` and the sweeps run it. Trials that would share a GPU get a hint on
stderr: packing seeds into one trial is faster.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from sweepgrok.cli.common import fail
from sweepgrok.config.grid_file import is_grid_doc, load_grid
from sweepgrok.config.trial import SECTIONS, ConfigError, device_problem, load_config, read_mapping


def kind_of(doc: Mapping[str, Any]) -> str:
    """search (has `search:`), grid (grid/zip, or base + seeds), or trial (config sections)."""
    if "search" in doc:
        return "search"
    if is_grid_doc(doc):
        return "grid"
    if not doc or all(k in SECTIONS for k in doc):
        return "trial"
    if "base" in doc:
        return "grid"  # a single-trial grid (base only); load_grid names any bad key
    return "trial"  # from_tree names the unknown section


def _warn_devices(path: Path, devices: set[str]) -> None:
    """A warning line for each train.device this machine cannot run."""
    for device in sorted(devices):
        problem = device_problem(device)
        if problem:
            typer.echo(f"warning: {path}: {problem}", err=True)


GPU_SHARING_HINT = (
    "hint: {path}: resources.gpu: {gpu:g} runs up to {k} trials on one GPU; trials sharing a GPU "
    "take turns on it (three processes on one H200 each ran at about 1/2.8 of their solo speed): "
    "packing seeds into one trial (seeds_per_trial, or train.seeds) with resources.gpu: 1 is "
    "faster (docs/grids.md, Trials on GPUs)"
)
"""What `validate` says about a fractional GPU per trial (the measurement: docs/grids.md)."""


def _hint_gpu_sharing(path: Path, gpu: float) -> None:
    """A hint line when trials would share a GPU (0 < gpu < 1)."""
    if 0 < gpu < 1:
        k = int(1 // gpu)
        typer.echo(GPU_SHARING_HINT.format(path=path, gpu=gpu, k=k), err=True)


def _search_summary(path: Path) -> str:
    try:
        module = importlib.import_module("sweepgrok.config.search_file")
    except ModuleNotFoundError:
        raise ConfigError(
            f"{path}: search files need sweepgrok.config.search_file (not installed)"
        ) from None
    spec = module.load_search(path)
    _warn_devices(path, {str(spec.base.get("train.device"))})
    _hint_gpu_sharing(path, spec.settings.resources.gpu)
    name = getattr(getattr(spec, "settings", spec), "name", path.stem)
    trials = getattr(spec, "n_trials", None) or getattr(spec, "num_samples", None)
    return f"search {name}" + (f": {trials} trials" if trials else "")


def summarize(path: Path) -> str:
    """Validate `path` and describe it in one line; raises ConfigError on any mistake."""
    doc = read_mapping(path, "keys (a trial, grid or search file)")
    kind = kind_of(doc)
    if kind == "search":
        return _search_summary(path)
    if kind == "grid":
        spec = load_grid(path)
        _warn_devices(path, {str(t.flat["train.device"]) for t in spec.trials})
        _hint_gpu_sharing(path, spec.settings.resources.gpu)
        varying = f" over {', '.join(spec.varying)}" if spec.varying else ""
        return f"grid {spec.settings.name}: {len(spec.trials)} trials{varying}"
    cfg = load_config(path)
    _warn_devices(path, {cfg.train.device})
    seeds = cfg.train.seed_list
    return (
        f"trial {path.stem}: {cfg.model.arch} on {cfg.task.name} (p={cfg.task.p}), "
        f"{len(seeds)} seed(s), {cfg.train.max_steps} steps"
    )


def validate(
    file: Annotated[
        Path, typer.Argument(help="Trial, grid or search file (YAML).", show_default=False)
    ],
) -> None:
    """Check a trial, grid or search file: a one-line summary (exit 0) or the error (exit 2)."""
    try:
        typer.echo(summarize(file))
    except ConfigError as err:
        raise fail(str(err)) from None
