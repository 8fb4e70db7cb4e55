"""Grid files: read, validate and expand into one flat trial config per Ray Tune trial.

A grid file (YAML)::

    name: quickstart                 # sweep folder <storage>/<name>/
    base: trial.yaml                 # trial config: a path (relative to this file) or a mapping
    grid:                            # dotted key -> non-empty list; cross product
      model.norm: [none, layernorm, sphere]
    zip:                             # optional groups of equal-length lists, zipped, then crossed
      - {model.norm: [sphere, layernorm], optim.weight_decay: [0.0, 1.0]}
    seeds: [1, 2, 3]                 # shorthand for a train.seed axis
    seeds_per_trial: 3               # optional: pack that many seeds per trial (train.seeds)
    resources: {cpu: 1, gpu: 0}      # per trial; fractions allowed
    max_concurrent: 2                # optional cap on trials running at once
    storage: runs                    # default "runs"
    max_failures: 1                  # retries of a crashed trial (from its checkpoint)
    checkpoint_every: 10             # evaluations between trial checkpoints (default train's)

Everything is validated before anything starts: every expanded trial goes through
``sweepgrok.config.from_flat``. The common pieces (``read_common`` and the ``read_*`` helpers)
are shared with the Optuna search files (``sweepgrok.search_file``). No Ray import here.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweepgrok.config import (
    ConfigError,
    all_keys,
    flatten,
    from_flat,
    from_tree,
    read_yaml,
    unknown_key_message,
)

COMMON_KEYS = (
    "name",
    "base",
    "storage",
    "resources",
    "max_concurrent",
    "max_failures",
    "checkpoint_every",
)
"""Top-level keys every sweep file (grid or search) accepts."""

GRID_KEYS = (*COMMON_KEYS, "grid", "zip", "seeds", "seeds_per_trial")
"""Top-level keys of a grid file."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class Resources:
    """Per-trial resources requested from Ray (fractions allowed)."""

    cpu: float = 1.0
    gpu: float = 0.0

    def as_ray(self) -> dict[str, float]:
        """The dict ``tune.with_resources`` takes."""
        return {"cpu": self.cpu, "gpu": self.gpu}


@dataclass(frozen=True)
class SweepSettings:
    """What every sweep file says besides its trials (shared by grid and search files)."""

    name: str
    source: Path
    base: dict[str, Any]
    """The base trial config as a nested tree (validated)."""
    storage: str = "runs"
    resources: Resources = field(default_factory=Resources)
    max_concurrent: int | None = None
    max_failures: int = 1
    checkpoint_every: int | None = None

    def sweep_dir(self, storage: str | Path | None = None) -> Path:
        """<storage>/<name>, storage relative to the current directory (CLI --storage wins)."""
        return Path(storage if storage is not None else self.storage) / self.name


@dataclass(frozen=True)
class Trial:
    """One expanded trial: its position, the values that vary, and the full flat config."""

    index: int
    overrides: dict[str, Any]
    flat: dict[str, Any]


@dataclass(frozen=True)
class GridSpec:
    """A validated grid file: settings plus the expanded trials."""

    settings: SweepSettings
    trials: list[Trial]
    varying: list[str]
    """Dotted keys that take more than one value across the trials (table columns)."""


# ---- common pieces (also used by sweepgrok.search_file) -------------------------------------


def read_sweep_doc(path: str | Path) -> dict[str, Any]:
    """Read a sweep YAML file; it must be a mapping."""
    doc = read_yaml(path)
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{path}: a sweep file must be a mapping of top-level keys")
    return dict(doc)


def check_keys(doc: Mapping[str, Any], allowed: Sequence[str], path: str | Path) -> None:
    """Reject unknown top-level keys, naming them and the allowed ones."""
    unknown = [str(k) for k in doc if k not in allowed]
    if unknown:
        raise ConfigError(
            f"{path}: unknown key '{unknown[0]}': allowed top-level keys are {', '.join(allowed)}"
        )


def read_name(doc: Mapping[str, Any], path: str | Path) -> str:
    """`name`: the sweep folder name (defaults to the file's stem)."""
    name = doc.get("name", Path(path).stem)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{path}: name: must be a folder name of letters, digits, '_', '-', '.' (got {name!r})"
        )
    return name


def read_base(doc: Mapping[str, Any], path: str | Path) -> dict[str, Any]:
    """`base`: an inline trial config mapping, or a trial YAML path relative to the sweep file.

    Returns the nested tree after validating it (so a typo in the base is reported once, with
    the base file's name, rather than once per trial).
    """
    raw = doc.get("base", {})
    if raw is None:
        raw = {}
    if isinstance(raw, str):
        base_path = (Path(path).parent / raw) if not Path(raw).is_absolute() else Path(raw)
        tree = read_yaml(base_path) or {}
        source = str(base_path)
    elif isinstance(raw, Mapping):
        tree, source = raw, f"{path}: base"
    else:
        raise ConfigError(f"{path}: base: must be a mapping of sections or a path (got {raw!r})")
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{source}: a trial config must be a mapping of sections")
    from_tree(tree, source)
    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in tree.items()}


def read_storage(doc: Mapping[str, Any], path: str | Path) -> str:
    """`storage`: root folder (or URI) of sweep folders; default "runs"."""
    storage = doc.get("storage", "runs")
    if not isinstance(storage, str) or not storage.strip():
        raise ConfigError(f"{path}: storage: must be a non-empty path string (got {storage!r})")
    return storage


def _number(value: Any, key: str, path: str | Path, *, integer: bool, minimum: float) -> Any:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or value < minimum:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{path}: {key}: must be {kind} >= {minimum:g} (got {value!r})")
    return value


def read_resources(doc: Mapping[str, Any], path: str | Path) -> Resources:
    """`resources`: {cpu, gpu} per trial, fractions allowed; default one CPU."""
    raw = doc.get("resources") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: resources: must be a mapping with keys cpu, gpu (got {raw!r})")
    for key in raw:
        if key not in ("cpu", "gpu"):
            raise ConfigError(f"{path}: unknown key 'resources.{key}': allowed keys are cpu, gpu")
    cpu = _number(raw.get("cpu", 1.0), "resources.cpu", path, integer=False, minimum=0)
    gpu = _number(raw.get("gpu", 0.0), "resources.gpu", path, integer=False, minimum=0)
    if cpu == 0 and gpu == 0:
        raise ConfigError(f"{path}: resources: a trial needs some cpu or gpu (got {dict(raw)})")
    return Resources(float(cpu), float(gpu))


def read_max_concurrent(doc: Mapping[str, Any], path: str | Path) -> int | None:
    """`max_concurrent`: cap on trials running at once (null = as many as resources allow)."""
    value = doc.get("max_concurrent")
    if value is None:
        return None
    return int(_number(value, "max_concurrent", path, integer=True, minimum=1))


def read_max_failures(doc: Mapping[str, Any], path: str | Path) -> int:
    """`max_failures`: times a crashed trial is retried from its checkpoint; default 1."""
    return int(_number(doc.get("max_failures", 1), "max_failures", path, integer=True, minimum=0))


def read_checkpoint_every(doc: Mapping[str, Any], path: str | Path) -> int | None:
    """`checkpoint_every`: evaluations between trial checkpoints (null = train.checkpoint_every)."""
    value = doc.get("checkpoint_every")
    if value is None:
        return None
    return int(_number(value, "checkpoint_every", path, integer=True, minimum=1))


def read_common(doc: Mapping[str, Any], path: str | Path) -> SweepSettings:
    """Every common key of a sweep file, validated (unknown keys are the caller's check)."""
    return SweepSettings(
        name=read_name(doc, path),
        source=Path(path),
        base=read_base(doc, path),
        storage=read_storage(doc, path),
        resources=read_resources(doc, path),
        max_concurrent=read_max_concurrent(doc, path),
        max_failures=read_max_failures(doc, path),
        checkpoint_every=read_checkpoint_every(doc, path),
    )


def base_flat(settings: SweepSettings) -> dict[str, Any]:
    """The base trial config as a full flat dict (defaults filled in)."""
    return flatten(from_tree(settings.base, str(settings.source)))


# ---- grid files ------------------------------------------------------------------------------


def _check_axis(key: Any, values: Any, where: str, path: str | Path) -> None:
    if not isinstance(key, str) or key not in set(all_keys()):
        raise ConfigError(f"{path}: {where}: {unknown_key_message(str(key))}")
    if not isinstance(values, list) or not values:
        raise ConfigError(
            f"{path}: {where}.{key}: must be a non-empty list of values (got {values!r})"
        )


def read_grid_axes(doc: Mapping[str, Any], path: str | Path) -> list[list[dict[str, Any]]]:
    """`grid` and `zip` as a list of axes; each axis is a list of {key: value} choices."""
    raw = doc.get("grid") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: grid: must be a mapping of dotted key -> list (got {raw!r})")
    axes: list[list[dict[str, Any]]] = []
    seen: set[str] = set()
    for key, values in raw.items():
        _check_axis(key, values, "grid", path)
        axes.append([{key: v} for v in values])
        seen.add(key)
    groups = doc.get("zip") or []
    if not isinstance(groups, list):
        raise ConfigError(f"{path}: zip: must be a list of mappings dotted key -> list")
    for i, group in enumerate(groups):
        where = f"zip[{i}]"
        if not isinstance(group, Mapping) or not group:
            raise ConfigError(f"{path}: {where}: must be a non-empty mapping dotted key -> list")
        for key, values in group.items():
            _check_axis(key, values, where, path)
            if key in seen:
                raise ConfigError(
                    f"{path}: {where}.{key}: key already varies elsewhere in the grid"
                )
            seen.add(key)
        lengths = {k: len(v) for k, v in group.items()}
        if len(set(lengths.values())) != 1:
            raise ConfigError(f"{path}: {where}: lists must have equal lengths (got {lengths})")
        axes.append(
            [dict(zip(group, combo, strict=True)) for combo in zip(*group.values(), strict=True)]
        )
    if ("train.seed" in seen or "train.seeds" in seen) and "seeds" in doc:
        raise ConfigError(f"{path}: seeds: train.seed already varies in grid/zip; use one of them")
    return axes


def read_seed_axis(doc: Mapping[str, Any], path: str | Path) -> list[dict[str, Any]] | None:
    """`seeds` (+ `seeds_per_trial`) as one axis: train.seed, or packed train.seeds chunks."""
    seeds = doc.get("seeds")
    per_trial = doc.get("seeds_per_trial")
    if seeds is None:
        if per_trial is not None:
            raise ConfigError(f"{path}: seeds_per_trial: needs a seeds list")
        return None
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
    ):
        raise ConfigError(f"{path}: seeds: must be a non-empty list of ints >= 0 (got {seeds!r})")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{path}: seeds: must be distinct (got {seeds})")
    if per_trial is None:
        return [{"train.seed": s} for s in seeds]
    k = int(_number(per_trial, "seeds_per_trial", path, integer=True, minimum=1))
    chunks = [seeds[i : i + k] for i in range(0, len(seeds), k)]
    return [{"train.seed": c[0], "train.seeds": c} for c in chunks]


def expand(
    base: Mapping[str, Any], axes: Sequence[Sequence[Mapping[str, Any]]], path: str | Path
) -> list[Trial]:
    """Cross product of the axes over the base flat config, each trial validated."""
    trials = []
    for index, combo in enumerate(itertools.product(*axes)):
        overrides: dict[str, Any] = {}
        for choice in combo:
            overrides.update(choice)
        cfg = from_flat({**base, **overrides}, f"{path}: trial {index} {_short(overrides)}")
        trials.append(Trial(index, overrides, flatten(cfg)))
    return trials


def _short(overrides: Mapping[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + ")"


def varying_keys(trials: Sequence[Trial]) -> list[str]:
    """Keys of the overrides that take more than one value across the trials, in file order."""
    keys: dict[str, None] = {}
    for t in trials:
        keys.update(dict.fromkeys(t.overrides))
    if "train.seeds" in keys:  # packed seeds: train.seed is just the first of each pack
        keys.pop("train.seed", None)
    return [k for k in keys if len({repr(t.flat.get(k)) for t in trials}) > 1]


def load_grid(path: str | Path) -> GridSpec:
    """Read, validate and expand a grid file; raises ConfigError naming file and key."""
    doc = read_sweep_doc(path)
    check_keys(doc, GRID_KEYS, path)
    settings = read_common(doc, path)
    axes = read_grid_axes(doc, path)
    seed_axis = read_seed_axis(doc, path)
    if seed_axis is not None:
        axes.append(seed_axis)
    trials = expand(base_flat(settings), axes, path)
    return GridSpec(settings, trials, varying_keys(trials))


def is_grid_doc(doc: Mapping[str, Any]) -> bool:
    """Heuristic used by `sweepgrok validate`: a grid file has grid/zip, or base plus seeds."""
    return "search" not in doc and (
        "grid" in doc or "zip" in doc or ("base" in doc and "seeds" in doc)
    )
