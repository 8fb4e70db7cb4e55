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

Everything is checked before anything starts: each bound and each choice is applied to the
base config and validated by ``sweepgrok.config.from_flat``, so a value that the trainer would
reject is reported here, with the file and the key. Only marginal values are checked: two keys
whose combination is invalid (``model.d_model`` / ``model.n_heads``) fail as that trial.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from sweepgrok.config import Config, ConfigError, all_keys, from_flat, unknown_key_message
from sweepgrok.spaces import (
    COMMON_KEYS,
    SweepSettings,
    base_flat,
    check_keys,
    read_common,
    read_sweep_doc,
)

SEARCH_FILE_KEYS = (*COMMON_KEYS, "search")
"""Top-level keys of a search file."""

SEARCH_KEYS = (
    "metric",
    "mode",
    "num_samples",
    "max_concurrent",
    "sampler",
    "seed",
    "seeds_per_trial",
    "time_cap_margin",
    "study_storage",
    "space",
)
"""Keys of the `search:` section."""

METRICS = ("grok_step", "grok_step_95", "grok_step_99")
"""Objectives: the grok step at train.grok_threshold, at 0.95, or at 0.99 (runs/ columns)."""
MODES = ("min", "max")
SAMPLERS = ("tpe", "random", "gp", "cmaes")
STUDY_STORAGES = ("sqlite", "journal")
DISTRIBUTIONS = ("uniform", "loguniform", "int", "choice")
SAMPLER_EXTRAS = {"gp": "scipy", "cmaes": "cmaes"}
"""Sampler -> the Python package it needs beyond optuna."""

FIXED_KEYS = {
    "train.max_steps": "the budget sets the censored objective; it must be the same for all trials",
    "train.grok_threshold": "it defines the objective; trials must share it",
    "train.seed": "init seeds come from the base (and search.seeds_per_trial)",
    "train.seeds": "init seeds come from the base (and search.seeds_per_trial)",
}
"""Keys a space may not vary, and why."""


@dataclass(frozen=True)
class Dist:
    """One searched key: a distribution Optuna samples from."""

    key: str
    kind: Literal["uniform", "loguniform", "int", "choice"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

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


@dataclass(frozen=True)
class SearchSpec:
    """A validated search file: sweep settings, search settings, the space, the trial base."""

    settings: SweepSettings
    base: Mapping[str, Any]
    """The full flat base trial config (seeds of seeds_per_trial applied)."""
    space: tuple[Dist, ...]
    metric: str = "grok_step"
    mode: str = "min"
    num_samples: int = 20
    max_concurrent: int = 1
    sampler: str = "tpe"
    seed: int | None = 0
    seeds_per_trial: int = 1
    time_cap_margin: float | None = 1.0
    study_storage: str = "sqlite"

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
        return {"grok_step_95": 0.95, "grok_step_99": 0.99}.get(
            self.metric, float(self.base["train.grok_threshold"])
        )

    @property
    def time_cap(self) -> bool:
        """Whether trials are stopped once they cannot win (only meaningful when minimizing)."""
        return self.mode == "min" and self.time_cap_margin is not None

    def sweep_dir(self, storage: str | Path | None = None) -> Path:
        return self.settings.sweep_dir(storage)

    def trial_flat(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The full flat config of one trial: the base with the sampled params applied."""
        return {**self.base, **params}

    def trial_config(self, params: Mapping[str, Any]) -> Config:
        return from_flat(self.trial_flat(params), f"{self.settings.source}: trial {dict(params)}")

    def with_overrides(self, **changes: Any) -> SearchSpec:
        """A copy with CLI overrides (num_samples, max_concurrent); None leaves a value."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# ---- readers ---------------------------------------------------------------------------------


def _int(value: Any, key: str, path: str | Path, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{path}: search.{key}: must be an integer >= {minimum} (got {value!r})")
    return value


def _one_of(value: Any, key: str, allowed: Sequence[str], path: str | Path) -> str:
    if value not in allowed:
        raise ConfigError(
            f"{path}: search.{key}: must be one of {', '.join(allowed)} (got {value!r})"
        )
    return str(value)


def read_sampler(section: Mapping[str, Any], path: str | Path) -> str:
    """`sampler`: tpe (default), random, gp, cmaes; gp/cmaes need their extra package."""
    sampler = _one_of(section.get("sampler", "tpe"), "sampler", SAMPLERS, path)
    extra = SAMPLER_EXTRAS.get(sampler)
    if extra and importlib.util.find_spec(extra) is None:
        raise ConfigError(
            f"{path}: search.sampler: {sampler} needs the '{extra}' package, which is not "
            f"installed (pip install {extra}); or use one of tpe, random"
        )
    return sampler


def read_margin(section: Mapping[str, Any], path: str | Path) -> float | None:
    """`time_cap_margin`: >= 1 (a smaller one would stop trials that could still win)."""
    value = section.get("time_cap_margin", 1.0)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1.0:
        raise ConfigError(
            f"{path}: search.time_cap_margin: must be a number >= 1, or null to turn the time "
            f"cap off (got {value!r})"
        )
    return float(value)


def read_seed(section: Mapping[str, Any], path: str | Path) -> int | None:
    value = section.get("seed", 0)
    return None if value is None else _int(value, "seed", path, 0)


def _bounds(key: str, kind: str, raw: Any, path: str | Path) -> tuple[float, float]:
    where = f"{path}: search.space.{key}.{kind}"
    ok = isinstance(raw, list) and len(raw) == 2
    ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
    if kind == "int":
        ok = ok and all(isinstance(v, int) for v in raw)
    if not ok:
        what = "integers" if kind == "int" else "numbers"
        raise ConfigError(f"{where}: must be a list [lo, hi] of two {what} (got {raw!r})")
    lo, hi = raw
    if lo >= hi:
        raise ConfigError(f"{where}: lo must be < hi (got [{lo}, {hi}])")
    return lo, hi


def read_dist(key: Any, raw: Any, path: str | Path) -> Dist:
    """One `space` entry -> Dist, with the key and the distribution checked."""
    if not isinstance(key, str) or key not in set(all_keys()):
        raise ConfigError(f"{path}: search.space: {unknown_key_message(str(key))}")
    if key in FIXED_KEYS:
        raise ConfigError(f"{path}: search.space.{key}: cannot be searched ({FIXED_KEYS[key]})")
    allowed = ", ".join(DISTRIBUTIONS)
    kinds = [k for k in raw if k in DISTRIBUTIONS] if isinstance(raw, Mapping) else []
    if not isinstance(raw, Mapping) or len(kinds) != 1:
        raise ConfigError(
            f"{path}: search.space.{key}: must be a mapping with exactly one distribution, "
            f"one of {allowed} (got {raw!r})"
        )
    kind = kinds[0]
    extra = [str(k) for k in raw if k != kind and not (kind == "int" and k == "log")]
    if extra:
        hint = " (log belongs to int)" if "log" in extra else ""
        raise ConfigError(
            f"{path}: search.space.{key}: unknown key '{extra[0]}'{hint}: a distribution is "
            f"one of {allowed}"
        )
    value = raw[kind]
    if kind == "choice":
        return Dist(key, "choice", choices=_choices(key, value, path))
    lo, hi = _bounds(key, kind, value, path)
    log = raw.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{path}: search.space.{key}.log: must be true or false (got {log!r})")
    if kind == "loguniform" and lo <= 0:
        raise ConfigError(f"{path}: search.space.{key}.loguniform: lo must be > 0 (got {lo})")
    if kind == "int" and log and lo < 1:
        raise ConfigError(f"{path}: search.space.{key}.int: lo must be >= 1 with log (got {lo})")
    return Dist(key, kind, low=lo, high=hi, log=log or kind == "loguniform")


def _choices(key: str, value: Any, path: str | Path) -> tuple[Any, ...]:
    where = f"{path}: search.space.{key}.choice"
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: must be a non-empty list of values (got {value!r})")
    # Optuna stores categorical choices as JSON scalars: lists (optim.betas) cannot be choices.
    bad = [v for v in value if not (v is None or isinstance(v, bool | int | float | str))]
    if bad:
        raise ConfigError(f"{where}: values must be numbers, strings, booleans or null: {bad[0]!r}")
    if len({repr(v) for v in value}) != len(value):
        raise ConfigError(f"{where}: values must be distinct (got {value})")
    return tuple(value)


def read_space(section: Mapping[str, Any], path: str | Path) -> tuple[Dist, ...]:
    raw = section.get("space")
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            f"{path}: search.space: must be a non-empty mapping dotted key -> distribution "
            f"({', '.join(DISTRIBUTIONS)}) (got {raw!r})"
        )
    return tuple(read_dist(k, v, path) for k, v in raw.items())


def check_space(space: Sequence[Dist], base: Mapping[str, Any], path: str | Path) -> None:
    """Every bound / choice applied alone to the base must give a valid trial config."""
    for dist in space:
        for value in dist.probes():
            try:
                from_flat({**base, dist.key: value})
            except ConfigError as err:
                raise ConfigError(
                    f"{path}: search.space.{dist.key}: value {value!r} makes the trial config "
                    f"invalid: {err}"
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
    theta = {"grok_step_95": 0.95, "grok_step_99": 0.99}.get(metric)
    stop_at = float(base["train.grok_threshold"])
    if theta is not None and base["train.stop_after_grok"] and theta > stop_at:
        raise ConfigError(
            f"{path}: search.metric: {metric} needs test accuracy {theta}, but runs stop at "
            f"train.grok_threshold {stop_at}: use grok_step, or raise train.grok_threshold"
        )


def load_search(path: str | Path) -> SearchSpec:
    """Read and validate a search file; raises ConfigError naming the file and the key."""
    doc = read_sweep_doc(path)
    check_keys(doc, SEARCH_FILE_KEYS, path)
    settings = read_common(doc, path)
    section = doc.get("search")
    if not isinstance(section, Mapping):
        raise ConfigError(f"{path}: search: must be a mapping with keys {', '.join(SEARCH_KEYS)}")
    for key in section:
        if key not in SEARCH_KEYS:
            raise ConfigError(
                f"{path}: unknown key 'search.{key}': allowed keys are {', '.join(SEARCH_KEYS)}"
            )
    base = base_flat(settings)
    k = _int(section.get("seeds_per_trial", 1), "seeds_per_trial", path, 1)
    base = {**base, **seeds_for(base, k, path)}
    from_flat(base, f"{path}: base with seeds_per_trial")
    metric = _one_of(section.get("metric", "grok_step"), "metric", METRICS, path)
    check_metric(metric, base, path)
    space = read_space(section, path)
    check_space(space, base, path)
    concurrent = section.get("max_concurrent", settings.max_concurrent or 1)
    return SearchSpec(
        settings=settings,
        base=base,
        space=space,
        metric=metric,
        mode=_one_of(section.get("mode", "min"), "mode", MODES, path),
        num_samples=_int(section.get("num_samples", 20), "num_samples", path, 1),
        max_concurrent=_int(concurrent, "max_concurrent", path, 1),
        sampler=read_sampler(section, path),
        seed=read_seed(section, path),
        seeds_per_trial=k,
        time_cap_margin=read_margin(section, path),
        study_storage=_one_of(
            section.get("study_storage", "sqlite"), "study_storage", STUDY_STORAGES, path
        ),
    )


def is_search_doc(doc: Mapping[str, Any]) -> bool:
    """A search file is a sweep file with a `search:` section."""
    return "search" in doc
