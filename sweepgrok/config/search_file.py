"""Optuna search files: read and validate them (no optuna or ray import here).

A search file (YAML)::

    name: geomdr_optuna              # sweep folder <storage>/<name>/
    base: trial_geomdr_mlp97.yaml    # trial config: a path (relative to this file) or a mapping
    storage: runs                    # root of sweep folders (CLI --storage wins)
    resources: {cpu: 1, gpu: 0}      # per trial
    max_failures: 1                  # retries of a crashed trial (from its checkpoint)
    search:
      metric: grok_step              # grok_step (at train.grok_threshold), grok_step_95/_99
      mode: min                      # min: fastest grokking; max: the most delaying schedule
      num_samples: 40                # trials in the study (a --resume tops it up to this)
      max_concurrent: 2              # trials at once (TPE's constant liar handles the rest)
      sampler: tpe                   # tpe, random, gp (needs scipy), cmaes (needs cmaes)
      seed: 0                        # sampler seed
      seeds_per_trial: 1             # k > 1: objective = median over k init seeds in lockstep
      time_cap_margin: 1.0           # stop a trial once it cannot beat best * margin (null: off)
      study_storage: sqlite          # sqlite (<sweep>/optuna.db) or journal (optuna.journal)
      space:                         # dotted config key -> distribution
        geomdr.lambda_max: {loguniform: [0.01, 1.0]}
        geomdr.ramp_steps: {int: [0, 4000]}
        geomdr.target_dim: {int: [8, 128], log: true}
        geomdr.start_step: {int: [0, 5000]}
        model.norm: {choice: [none, layernorm]}

Each key is a documented field of ``SearchFile``, ``SearchSection`` and the distributions
(``Uniform``, ``LogUniform``, ``IntRange``, ``Choice``).
Everything is checked before anything starts: each bound and each choice is applied to the
base config and validated by ``sweepgrok.config.trial.from_flat``, so a value that the trainer would
reject is reported here, with the file and the key. Only marginal values are checked: two keys
whose combination is invalid (``model.d_model`` / ``model.n_heads``) fail as that trial.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from sweepgrok.config.confirm_section import ConfirmSection, reused_seeds
from sweepgrok.config.grid_file import (
    FILE_CONFIG,
    MAX_CONCURRENT,
    ConfigKey,
    SweepFile,
    check_cuda_has_gpu,
    read_sweep_doc,
    validate_file,
)
from sweepgrok.config.thresholds import GROK_STEP_COLUMNS
from sweepgrok.config.trial import MAX_SEEDS, SEED_KEYS, Config, ConfigError, from_flat
from sweepgrok.core.errors import excerpt, quoted

if TYPE_CHECKING:
    SearchMetric = str
else:
    SearchMetric = Literal[("grok_step", *GROK_STEP_COLUMNS)]
"""A search objective: grok_step (at train.grok_threshold) or a runs/ grok_step_<tag> column,
derived from sweepgrok.config.thresholds (never spelled here)."""

StudyStorage = Literal["sqlite", "journal"]
"""Where a study lives in the sweep folder: sqlite (optuna.db) or journal (optuna.journal)."""
SAMPLER_EXTRAS = {"gp": "scipy", "cmaes": "cmaes"}
"""Sampler -> the Python package it needs beyond optuna."""

FIXED_KEYS = {
    "train.max_steps": "the budget sets the censored objective; it must be the same for all trials",
    "train.grok_threshold": "it defines the objective; trials must share it",
    **dict.fromkeys(SEED_KEYS, "init seeds come from the base (and search.seeds_per_trial)"),
}
"""Keys a space may not vary, and why."""


# ---- distributions ---------------------------------------------------------------------------


class _Dist(BaseModel):
    """One searched key: a distribution Optuna samples from (written in the shorthand below)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True
    )

    key: str = ""
    """The dotted config key searched (the key of the `space` entry)."""
    kind: str
    """The distribution: the shorthand's key."""
    low: float | None = None
    """Lower bound of a range (inclusive)."""
    high: float | None = None
    """Upper bound of a range (inclusive)."""
    log: StrictBool = False
    """Sample in log space."""
    choices: tuple[Any, ...] = ()
    """The values of a choice."""

    def probes(self) -> list[Any]:
        """The values validated against the base: both bounds, or every choice."""
        if self.kind == "choice":
            return list(self.choices)
        return [self.low, self.high]

    def describe(self) -> str:
        """A short text for tables: 'int [8, 128] log'."""
        if self.kind == "choice":
            return "choice " + ", ".join(map(str, self.choices))
        log = " log" if self.log and self.kind == "int" else ""
        return f"{self.kind} [{self.low:g}, {self.high:g}]{log}"


class _Range(_Dist):
    low: int | float  # ints stay ints: the study fingerprint (sweepgrok.search) hashes them
    high: int | float

    @model_validator(mode="after")
    def _ordered(self) -> _Range:
        if self.low >= self.high:
            raise ValueError(f"lo must be < hi (got [{self.low}, {self.high}])")
        return self


class Uniform(_Range):
    """`{uniform: [lo, hi]}`: a float drawn uniformly from [lo, hi]."""

    kind: Literal["uniform"] = "uniform"


class LogUniform(_Range):
    """`{loguniform: [lo, hi]}`: a float drawn uniformly in log space; 0 < lo < hi."""

    kind: Literal["loguniform"] = "loguniform"
    log: StrictBool = True

    @model_validator(mode="after")
    def _positive(self) -> LogUniform:
        if self.low <= 0:
            raise ValueError(f"lo must be > 0 (got {self.low})")
        return self


class IntRange(_Range):
    """`{int: [lo, hi]}`, or `{int: [lo, hi], log: true}` (lo >= 1): an integer in [lo, hi]."""

    kind: Literal["int"] = "int"
    low: int
    high: int

    @model_validator(mode="after")
    def _log_positive(self) -> IntRange:
        if self.log and self.low < 1:
            raise ValueError(f"lo must be >= 1 with log (got {self.low})")
        return self


class Choice(_Dist):
    """`{choice: [a, b, ...]}`: one of distinct numbers, strings, booleans or null."""

    kind: Literal["choice"] = "choice"
    choices: tuple[Any, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _scalars(self) -> Choice:
        values = list(self.choices)
        # Optuna stores categorical choices as JSON scalars: lists (optim.betas) cannot be choices.
        bad = [v for v in values if not (v is None or isinstance(v, bool | int | float | str))]
        if bad:
            raise ValueError(f"values must be numbers, strings, booleans or null: {quoted(bad[0])}")
        if len({repr(v) for v in values}) != len(values):
            raise ValueError(f"values must be distinct (got {quoted(values)})")
        return self


_KINDS = {c.model_fields["kind"].default: c for c in (Uniform, LogUniform, IntRange, Choice)}
DISTRIBUTIONS = tuple(_KINDS)
"""The shorthand's keys: uniform, loguniform, int, choice."""


def _shorthand(raw: Any) -> Any:
    """`{uniform: [lo, hi]}` (and the other shorthands) -> the fields of that distribution."""
    allowed = ", ".join(DISTRIBUTIONS)
    kinds = [k for k in raw if k in _KINDS] if isinstance(raw, Mapping) else []
    if len(kinds) != 1:
        raise ValueError(
            f"must be a mapping with exactly one distribution, one of {allowed} (got {quoted(raw)})"
        )
    kind = kinds[0]
    extra = [str(k) for k in raw if k != kind and not (kind == "int" and k == "log")]
    if extra:
        hint = " (log belongs to int)" if "log" in extra else ""
        raise ValueError(
            f"unknown key '{excerpt(extra[0])}'{hint}: a distribution is one of {allowed}"
        )
    fields = {"kind": kind, **{k: v for k, v in raw.items() if k == "log"}}
    value = raw[kind]
    if kind == "choice" and not isinstance(value, list):
        raise ValueError(f"choice: must be a non-empty list of values (got {quoted(value)})")
    if kind == "choice":
        return {**fields, "choices": value}
    integers = kind == "int"
    number = int if integers else int | float
    if not (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, number) and not isinstance(v, bool) for v in value)
        and all(_finite(v) for v in value)
    ):
        what = "integers" if integers else "finite numbers"
        raise ValueError(f"{kind}: must be a list [lo, hi] of two {what} (got {quoted(value)})")
    return {**fields, "low": value[0], "high": value[1]}


def _finite(v: int | float) -> bool:
    """A finite number that a float holds (an int of 400 digits is not one: Optuna samples
    floats)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


Dist = Annotated[
    Uniform | LogUniform | IntRange | Choice,
    Field(discriminator="kind"),
    BeforeValidator(_shorthand),
]
"""One `space` entry, written `{uniform: [lo, hi]}`, `{loguniform: [lo, hi]}`,
`{int: [lo, hi]}` (optionally `log: true`) or `{choice: [a, b, ...]}`."""


def _searchable(key: str) -> str:
    if key in FIXED_KEYS:
        raise ValueError(f"cannot be searched ({FIXED_KEYS[key]})")
    return key


# ---- the file --------------------------------------------------------------------------------


class SearchSection(BaseModel):
    """The `search:` section: the objective, the sampler and the space."""

    model_config = FILE_CONFIG

    metric: SearchMetric = "grok_step"
    """Objective: the grok step at train.grok_threshold, at 0.95, or at 0.99 (runs/ columns)."""
    mode: Literal["min", "max"] = "min"
    """min: fastest grokking; max: the most delaying schedule."""
    num_samples: int = Field(20, ge=1, le=100_000)
    """Trials in the study (a --resume tops it up to this); at most 100000, 1000x a typical
    study (Optuna's samplers slow down with every stored trial)."""
    max_concurrent: int | None = Field(None, ge=1, le=MAX_CONCURRENT)
    """Trials at once (TPE's constant liar handles the rest); null = the top-level
    max_concurrent, else 1."""
    sampler: Literal["tpe", "random", "gp", "cmaes"] = "tpe"
    """Optuna sampler; gp needs scipy, cmaes needs cmaes."""
    seed: int | None = Field(0, ge=0, le=2**32 - 1)
    """Sampler seed (null = unseeded); at most 2**32 - 1, the range of numpy's seeds that the
    samplers use."""
    objective: Literal["median", "km_median"] = "median"
    """How a trial's k runs make its objective: ``median`` of the run values (a censored run
    scores past its censoring step, nearer the closer it came); ``km_median``: the Kaplan-Meier
    median of the k grok steps, censored runs counted as censored (a trial with under half its
    runs grokked scores past the budget). docs/search.md says when to use which."""
    seeds_per_trial: int = Field(1, ge=1, le=MAX_SEEDS)
    """k > 1: the objective is the median over k init seeds trained in lockstep (at most
    train.seeds' 1024)."""
    time_cap_margin: float | None = Field(1.0, ge=1.0)
    """Stop a trial once it cannot beat best * margin; >= 1 (a smaller one would stop trials
    that could still win); null turns the time cap off."""
    study_storage: StudyStorage = "sqlite"
    """sqlite (<sweep>/optuna.db) or journal (<sweep>/optuna.journal)."""
    space: dict[Annotated[ConfigKey, AfterValidator(_searchable)], Dist]
    """Dotted config key -> distribution (see Dist)."""

    @field_validator("sampler")
    @classmethod
    def _installed(cls, sampler: str) -> str:
        extra = SAMPLER_EXTRAS.get(sampler)
        if extra and importlib.util.find_spec(extra) is None:
            raise ValueError(
                f"{sampler} needs the '{extra}' package, which is not installed "
                f"(pip install {extra}); or use one of tpe, random"
            )
        return sampler

    @field_validator("space", mode="before")
    @classmethod
    def _non_empty(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping) or not raw:
            raise ValueError(
                "must be a non-empty mapping dotted key -> distribution "
                f"({', '.join(DISTRIBUTIONS)}) (got {quoted(raw)})"
            )
        return raw

    @field_validator("space")
    @classmethod
    def _keyed(cls, space: dict[str, Dist]) -> dict[str, Dist]:
        return {k: d.model_copy(update={"key": k}) for k, d in space.items()}


class SearchFile(SweepFile):
    """A search file: the sweep keys plus the `search:` section."""

    search: SearchSection
    """The objective, the sampler and the space."""
    confirm: ConfirmSection | None = None
    """Optional: re-run the best schedules and reference arms on fresh seeds once the search
    has ended (sweepgrok.config.confirm_section)."""


@dataclass(frozen=True)
class SearchSpec:
    """A validated search file: its keys, the flat trial base and the space in file order.

    The `search:` keys are copied here (documented on SearchSection), max_concurrent resolved.
    """

    settings: SearchFile
    base: Mapping[str, Any]
    """The full flat base trial config (seeds of seeds_per_trial applied)."""
    space: tuple[Dist, ...]
    metric: str
    mode: str
    num_samples: int
    max_concurrent: int
    sampler: str
    seed: int | None
    objective: str
    seeds_per_trial: int
    time_cap_margin: float | None
    study_storage: str
    confirm: ConfirmSection | None = None
    """The confirm stage (None: the file has none)."""

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def base_config(self) -> Config:
        return from_flat(self.base, str(self.settings.source))

    @property
    def budget(self) -> int:
        """train.max_steps of every trial."""
        return int(self.base["train.max_steps"])

    @property
    def threshold(self) -> float:
        """Test accuracy at which the objective's grok step is reached."""
        return GROK_STEP_COLUMNS.get(
            self.metric, float(self.base["train.grok_threshold"])
        )

    @property
    def time_cap(self) -> bool:
        """Whether trials are stopped once they cannot win (only meaningful when minimizing)."""
        return self.mode == "min" and self.time_cap_margin is not None

    def sweep_dir(self, storage: str | Path | None = None) -> Path:
        return self.settings.sweep_dir(storage)

    @property
    def search_seeds(self) -> list[int]:
        """The init seeds every trial of the search trains (the same for all trials)."""
        listed = self.base.get("train.seeds")
        return list(listed) if listed is not None else [int(self.base["train.seed"])]

    def trial_flat(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The full flat config of one trial: the base with the sampled params applied."""
        return {**self.base, **params}

    def trial_config(self, params: Mapping[str, Any]) -> Config:
        return from_flat(self.trial_flat(params), f"{self.settings.source}: trial {dict(params)}")

    def with_overrides(self, **changes: Any) -> SearchSpec:
        """A copy with CLI overrides (num_samples, max_concurrent); None leaves a value."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# ---- checks against the base -----------------------------------------------------------------


def check_space(space: Sequence[Dist], base: Mapping[str, Any], path: str | Path) -> None:
    """Every bound / choice applied alone to the base must give a valid trial config."""
    for dist in space:
        for value in dist.probes():
            try:
                from_flat({**base, dist.key: value})
            except ConfigError as err:
                raise ConfigError(
                    f"{path}: search.space.{dist.key}: value {quoted(value)} makes the trial "
                    f"config invalid: {err}"
                ) from None
    searched = {d.key for d in space}
    geomdr = sorted(k for k in searched if k.startswith("geomdr.") and k != "geomdr.enabled")
    if geomdr and not base["geomdr.enabled"] and "geomdr.enabled" not in searched:
        raise ConfigError(
            f"{path}: search.space: {', '.join(geomdr)} have no effect: the base has "
            "geomdr.enabled: false (set it true in the base)"
        )


def seeds_for(base: Mapping[str, Any], k: int, path: str | Path) -> dict[str, Any]:
    """Seed keys of every trial: k init seeds train.seed .. train.seed + k - 1 in lockstep.

    All trials share the same seeds (common random numbers: schedules are compared on the same
    inits, which removes init noise from their differences). A base with train.seeds keeps it.
    """
    listed = base.get("train.seeds")
    if listed is not None:
        if k not in (1, len(listed)):
            raise ConfigError(
                f"{path}: search.seeds_per_trial: {k} but the base lists {len(listed)} "
                f"train.seeds ({listed}); drop one of them"
            )
        return {}
    if k == 1:
        return {}
    first = int(base["train.seed"])
    return {"train.seeds": list(range(first, first + k))}


def check_metric(metric: str, base: Mapping[str, Any], path: str | Path) -> None:
    """A run that stops at grok_threshold never reaches a higher metric threshold."""
    theta = GROK_STEP_COLUMNS.get(metric)
    stop_at = float(base["train.grok_threshold"])
    if theta is not None and base["train.stop_after_grok"] and theta > stop_at:
        raise ConfigError(
            f"{path}: search.metric: {metric} needs test accuracy {theta}, but runs stop at "
            f"train.grok_threshold {stop_at}: use grok_step, or raise train.grok_threshold"
        )


def check_confirm(
    confirm: ConfirmSection, base: Mapping[str, Any], search_seeds: Sequence[int], path: str | Path
) -> None:
    """Fresh seeds only, and every reference arm a valid trial config at the confirm budget."""
    reused = reused_seeds(confirm, search_seeds)
    if reused:
        raise ConfigError(
            f"{path}: confirm.seeds: seed {reused[0]} was used by the search (its seeds: "
            f"{', '.join(map(str, search_seeds))}): the confirm stage needs fresh seeds"
        )
    budget = {} if confirm.max_steps is None else {"train.max_steps": confirm.max_steps}
    for name, overrides in {"(searched arms)": {}, **confirm.references}.items():
        where = f"{path}: confirm.references.{name}" if overrides else f"{path}: confirm"
        from_flat({**base, **budget, **overrides}, where)


def load_search(path: str | Path) -> SearchSpec:
    """Read and validate a search file; raises ConfigError naming the file and the key."""
    file = validate_file(SearchFile, read_sweep_doc(path), path)
    search = file.search
    base = file.base_flat()
    base = {**base, **seeds_for(base, search.seeds_per_trial, path)}
    from_flat(base, f"{path}: base with seeds_per_trial")
    check_metric(search.metric, base, path)
    space = tuple(search.space.values())
    check_space(space, base, path)
    searched = [v for d in space if d.key == "train.device" for v in d.probes()]
    check_cuda_has_gpu(file.resources, [base["train.device"], *searched], path)
    spec = SearchSpec(
        settings=file,
        base=base,
        space=space,
        **search.model_dump(exclude={"space", "max_concurrent"}),
        max_concurrent=search.max_concurrent or file.max_concurrent or 1,
        confirm=file.confirm,
    )
    if file.confirm is not None:
        check_confirm(file.confirm, base, spec.search_seeds, path)
    return spec


def is_search_doc(doc: Mapping[str, Any]) -> bool:
    """A search file is a sweep file with a `search:` section."""
    return "search" in doc
