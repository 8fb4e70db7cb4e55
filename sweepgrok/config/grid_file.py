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

Each key is a documented field of ``GridFile`` (the keys every sweep file has: ``SweepFile``).
Everything is validated before anything starts: every expanded trial goes through
``sweepgrok.config.trial.from_flat``. No Ray import here.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from sweepgrok.config.trial import (
    MAX_SEED,
    MAX_SEEDS,
    MAX_STEPS,
    SEED_KEYS,
    ConfigError,
    all_keys,
    flatten,
    format_errors,
    from_flat,
    from_tree,
    read_mapping,
    unknown_key_message,
)
from sweepgrok.core.errors import excerpt, quoted

FILE_CONFIG = ConfigDict(
    frozen=True, extra="forbid", strict=True, allow_inf_nan=False, use_attribute_docstrings=True
)
"""Sweep files: unknown keys are errors, no silent conversions (true is not 1, "3" not 3), and
numbers are finite (nan passes no range check, inf every lower bound)."""

MAX_CONCURRENT = 1_024
"""Most trials at once: more than the cores of any Ray cluster a sweep here needs."""


def _config_key(key: str) -> str:
    if key not in set(all_keys()):
        raise ValueError(unknown_key_message(key))
    return key


ConfigKey = Annotated[str, AfterValidator(_config_key)]
"""A dotted trial-config key (task.p, model.norm, ...)."""


def _values(value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a non-empty list of values (got {quoted(value)})")
    return value


Values = Annotated[list[Any], BeforeValidator(_values)]
"""The values one key takes across the trials."""


def _folder_name(name: str) -> str:
    # fullmatch: with re.match, "$" also matches before a trailing newline ("x\n").
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", name):
        raise ValueError(
            f"must be a folder name of letters, digits, '_', '-', '.' (got {quoted(name)})"
        )
    return name


_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")
"""s3://, gs://, file:/... (two letters at least: C:/ is a Windows drive)."""


def local_storage(storage: str) -> str:
    """The storage root, refused when it is a URL: a path library would make ``s3://b`` a local
    folder ``s3:/b`` and write the sweep there."""
    if _URL_SCHEME.match(storage):
        raise ValueError(
            "object stores and other URLs are not supported yet "
            f"(got {quoted(storage)}): use a local or shared-filesystem folder"
        )
    return storage


def seed_values(value: Any) -> list[int]:
    ok = isinstance(value, list) and value
    if not ok or not all(type(s) is int and 0 <= s <= MAX_SEED for s in value):
        raise ValueError(
            f"must be a non-empty list of ints in [0, 2**63 - 1] (got {quoted(value)})"
        )
    if len(set(value)) != len(value):
        raise ValueError(f"must be distinct (got {quoted(value)})")
    return value


@pydantic_dataclass(
    frozen=True,
    config=ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True),
)
class Resources:
    """Per-trial resources requested from Ray (fractions allowed)."""

    cpu: Annotated[float, Field(ge=0, le=1024, strict=True)] = 1.0
    """CPUs per trial (default 1; at most 1024, more than any one node has: a trial runs on
    one node)."""
    gpu: Annotated[float, Field(ge=0, le=64, strict=True)] = 0.0
    """GPUs per trial (default 0): a fraction below 1 shares a GPU between trials (0.5: two
    per GPU), else a whole number (Ray's rule); at most 64, more than any one node has. A trial
    with a GPU trains on it (train.device auto or cuda); one without trains on the CPU."""

    @model_validator(mode="after")
    def _some(self) -> Resources:
        if self.cpu == 0 and self.gpu == 0:
            raise ValueError(f"a trial needs some cpu or gpu (got cpu {self.cpu}, gpu {self.gpu})")
        if self.gpu > 1 and not self.gpu.is_integer():
            raise ValueError(
                f"gpu: a fraction below 1 or a whole number of GPUs (got {self.gpu:g})"
            )
        return self

    def as_ray(self) -> dict[str, float]:
        """The dict ``tune.with_resources`` takes."""
        return {"cpu": self.cpu, "gpu": self.gpu}


def _file(info: ValidationInfo) -> Path:
    """The file being validated (validate_file passes it in the context)."""
    return Path((info.context or {}).get("path", ""))


class SweepFile(BaseModel):
    """The keys every sweep file (grid or search) has. A null key means its default."""

    model_config = FILE_CONFIG

    name: Annotated[str, AfterValidator(_folder_name)]
    """Sweep folder name (<storage>/<name>/): letters, digits, '_', '-', '.'; default: the
    file's stem."""
    base: dict[str, Any] = {}
    """The base trial config: a mapping of sections, or a trial YAML path relative to this file
    (validated once here, so a typo in it is reported once, not once per trial)."""
    storage: Annotated[str, Field(min_length=1), AfterValidator(local_storage)] = "runs"
    """Root folder of sweep folders, relative to the current directory; the CLI's --storage
    wins. Object stores (s3://, gs://) are not supported yet."""
    resources: Resources = Resources()
    """Per-trial {cpu, gpu}, fractions allowed."""
    max_concurrent: int | None = Field(None, ge=1, le=MAX_CONCURRENT)
    """Cap on trials running at once (null = as many as the resources allow; at most 1024)."""
    max_failures: int = Field(1, ge=0, le=100)
    """Times a crashed trial is retried from its checkpoint (at most 100: a trial that crashed
    that often will crash again)."""
    checkpoint_every: int | None = Field(None, ge=1, le=MAX_STEPS)
    """Evaluations between trial checkpoints (null = the base's train.checkpoint_every)."""

    _source: Path = PrivateAttr(Path())

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = {k: v for k, v in data.items() if v is not None}
        return {"name": _file(info).stem, **data}

    @field_validator("base", mode="before")
    @classmethod
    def _read_base(cls, raw: Any, info: ValidationInfo) -> dict[str, Any]:
        source = ""
        if isinstance(raw, str):
            path = _file(info).parent / raw
            raw, source = read_mapping(path, "sections"), str(path)
        elif not isinstance(raw, Mapping):
            raise ValueError(f"must be a mapping of sections or a path (got {quoted(raw)})")
        from_tree(raw, source)
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}

    @model_validator(mode="after")
    def _remember_source(self, info: ValidationInfo) -> SweepFile:
        self._source = _file(info)
        return self

    @property
    def source(self) -> Path:
        """The file this was read from."""
        return self._source

    def sweep_dir(self, storage: str | Path | None = None) -> Path:
        """<storage>/<name>, storage relative to the current directory (CLI --storage wins)."""
        return Path(storage if storage is not None else self.storage) / self.name

    def base_flat(self) -> dict[str, Any]:
        """The base trial config as a full flat dict (defaults filled in)."""
        return flatten(from_tree(self.base, str(self.source)))


class GridFile(SweepFile):
    """A grid file: the trials are the cross product of its axes over the base."""

    grid: Annotated[dict[ConfigKey, Values], Field(min_length=1)] = {}
    """Dotted key -> non-empty list of values; each key is one axis of the cross product
    (omitted or null: no axis; an empty mapping is refused as a likely mistake)."""
    zip: Annotated[
        list[Annotated[dict[ConfigKey, Values], Field(min_length=1)]], Field(min_length=1)
    ] = []
    """Non-empty groups of equal-length lists: each group is zipped into one axis, then
    crossed (omitted or null: none)."""
    seeds: Annotated[list[int], BeforeValidator(seed_values)] | None = None
    """Distinct init seeds in [0, 2**63 - 1]: shorthand for a train.seed axis."""
    seeds_per_trial: int | None = Field(None, ge=1, le=MAX_SEEDS)
    """Pack that many seeds per trial (train.seeds, trained in lockstep); needs seeds. At most
    train.seeds' 1024."""

    @model_validator(mode="after")
    def _one_axis_per_key(self) -> GridFile:
        seen = set(self.grid)
        for i, group in enumerate(self.zip):
            lengths = {k: len(v) for k, v in group.items()}
            if len(set(lengths.values())) > 1:
                raise ValueError(f"zip[{i}]: lists must have equal lengths (got {lengths})")
            for key in group:
                if key in seen:
                    raise ValueError(f"zip[{i}].{key}: key already varies elsewhere in the grid")
                seen.add(key)
        if self.seeds is not None and seen & set(SEED_KEYS):
            raise ValueError("seeds: train.seed already varies in grid/zip; use one of them")
        if self.seeds is None and self.seeds_per_trial is not None:
            raise ValueError("seeds_per_trial: needs a seeds list")
        return self

    def axes(self) -> list[list[dict[str, Any]]]:
        """grid, zip and seeds as a list of axes; each axis is a list of {key: value} choices."""
        axes = [[{key: v} for v in values] for key, values in self.grid.items()]
        for group in self.zip:
            combos = zip(*group.values(), strict=True)
            axes.append([dict(zip(group, combo, strict=True)) for combo in combos])
        if self.seeds is not None and self.seeds_per_trial is None:
            axes.append([{"train.seed": s} for s in self.seeds])
        elif self.seeds is not None and self.seeds_per_trial is not None:
            k = self.seeds_per_trial
            chunks = [self.seeds[i : i + k] for i in range(0, len(self.seeds), k)]
            axes.append([{"train.seed": c[0], "train.seeds": c} for c in chunks])
        return axes


@dataclass(frozen=True)
class Trial:
    """One expanded trial: its position, the values that vary, and the full flat config."""

    index: int
    overrides: dict[str, Any]
    flat: dict[str, Any]
    label: str = ""
    """A name its runs carry in the runs/ column `arm` (the confirm stage's arms), or ''."""


def trial_labels(trials: Sequence[Trial]) -> list[list[Any]]:
    """[[label, flat config], ...] of the labelled trials: what a running trial looks its label
    up in (Tune hands a trial its flat config only)."""
    return [[t.label, dict(t.flat)] for t in trials if t.label]


def label_of(labels: Sequence[Sequence[Any]], flat: Mapping[str, Any]) -> str:
    """The label of the trial whose flat config is `flat` ('' when it has none)."""
    key = json.dumps(dict(flat), sort_keys=True, default=str)
    for label, cfg in labels:
        if json.dumps(dict(cfg), sort_keys=True, default=str) == key:
            return str(label)
    return ""


@dataclass(frozen=True)
class GridSpec:
    """A validated grid file: its keys plus the expanded trials."""

    settings: GridFile
    trials: list[Trial]
    varying: list[str]
    """Dotted keys that take more than one value across the trials (table columns)."""


File = TypeVar("File", bound=SweepFile)


def read_sweep_doc(path: str | Path) -> dict[str, Any]:
    """Read a sweep YAML file; it must be a mapping."""
    return read_mapping(path, "top-level keys (a sweep file)")


def validate_file(model: type[File], doc: Mapping[str, Any], path: str | Path) -> File:
    """Validate a sweep file's keys; raises ConfigError naming the file, the key and the rule."""
    try:
        return model.model_validate(doc, context={"path": Path(path)})
    except ValidationError as err:
        raise ConfigError(format_errors(err, str(path), model)) from None


def read_common(doc: Mapping[str, Any], path: str | Path) -> SweepFile:
    """The keys every sweep file has, validated (a doc with other keys is an error)."""
    return validate_file(SweepFile, doc, path)


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
    shown = (excerpt(v) if isinstance(v, str) else quoted(v) for v in overrides.values())
    return "(" + ", ".join(f"{k}={v}" for k, v in zip(overrides, shown, strict=True)) + ")"


def varying_keys(trials: Sequence[Trial]) -> list[str]:
    """Keys of the overrides that take more than one value across the trials, in file order."""
    keys: dict[str, None] = {}
    for t in trials:
        keys.update(dict.fromkeys(t.overrides))
    if SEED_KEYS[1] in keys:  # packed seeds: train.seed is just the first of each pack
        keys.pop(SEED_KEYS[0], None)
    return [k for k in keys if len({repr(t.flat.get(k)) for t in trials}) > 1]


MAX_TRIALS = 10_000
"""Most trials a grid file may expand to (the product of its axes, seeds included)."""


def check_trial_count(axes: Sequence[Sequence[Any]], path: str | Path) -> None:
    """Refuse a grid past MAX_TRIALS before expanding it (10^8 trials would never finish)."""
    count = math.prod(len(axis) for axis in axes)
    if count > MAX_TRIALS:
        sizes = " x ".join(str(len(axis)) for axis in axes)
        raise ConfigError(
            f"{path}: grid: {count:,} trials ({sizes}) is more than the limit of "
            f"{MAX_TRIALS:,} trials per grid file: split it into several sweeps"
        )


def check_cuda_has_gpu(resources: Resources, devices: Iterable[Any], path: str | Path) -> None:
    """A trial with train.device: cuda must ask Ray for a GPU: Ray accounts GPUs only to the
    trials that ask, and one that does not would share a GPU behind the scheduler's back."""
    if resources.gpu == 0 and "cuda" in set(devices):
        raise ConfigError(
            f"{path}: resources.gpu: 0, but trials ask for train.device: cuda: set "
            "resources: {gpu: 1} (a GPU per trial), or train.device: auto (the CPU without one)"
        )


def load_grid(path: str | Path) -> GridSpec:
    """Read, validate and expand a grid file; raises ConfigError naming file and key."""
    grid = validate_file(GridFile, read_sweep_doc(path), path)
    axes = grid.axes()
    check_trial_count(axes, path)
    trials = expand(grid.base_flat(), axes, path)
    check_cuda_has_gpu(grid.resources, (t.flat["train.device"] for t in trials), path)
    return GridSpec(grid, trials, varying_keys(trials))


def is_grid_doc(doc: Mapping[str, Any]) -> bool:
    """Heuristic used by `sweepgrok validate`: a grid file has grid/zip, or base plus seeds."""
    return "search" not in doc and (
        "grid" in doc or "zip" in doc or ("base" in doc and "seeds" in doc)
    )
