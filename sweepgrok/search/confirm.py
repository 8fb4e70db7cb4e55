"""The confirm stage's arms: chosen from a finished (or interrupted) study, kept in the sweep.

The arms are chosen once, when the stage starts, and written to ``<sweep>/confirm/arms.json``;
a ``--resume`` of the stage reads them back, so more search trials in between never change
what is being confirmed. The stage's runs land in ``<sweep>/confirm/``, a sweep folder of its
own (Parquet runs/ and metrics/, Tune's state), each run row labelled with its arm.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sweepgrok.config.confirm_section import ConfirmSection, searched_arm
from sweepgrok.config.grid_file import Trial
from sweepgrok.config.search_file import SearchSpec
from sweepgrok.config.trial import SEED_KEYS, ConfigError, flatten, from_flat

CONFIRM_DIR = "confirm"
"""The stage's sweep folder, inside the search's."""
ARMS_FILE = "arms.json"
"""The arms and seeds of the stage, in its folder."""


@dataclass(frozen=True)
class Arm:
    """One arm: a searched schedule or a named reference."""

    name: str
    """search_<rank> or the reference's name."""
    overrides: dict[str, Any]
    """The searched values of its trial, or the reference's keys, applied to the base."""
    trial: int | None = None
    """The Optuna trial number of a searched arm."""
    search_value: float | None = None
    """A searched arm's search objective (the value it was ranked by)."""
    capped: bool = False
    """Whether the time cap stopped that trial (its value is then a bound)."""

    @property
    def searched(self) -> bool:
        return self.trial is not None


@dataclass(frozen=True)
class Stage:
    """What arms.json holds."""

    study_name: str
    metric: str
    threshold: float
    """The grok threshold of the objective (and of the confirm table)."""
    budget: int
    """The search's train.max_steps: a search objective above it is a censored run's score."""
    search_seeds: list[int]
    seeds: list[int]
    arms: list[Arm] = field(default_factory=list)

    @property
    def references(self) -> list[str]:
        return [a.name for a in self.arms if not a.searched]


def choose_arms(spec: SearchSpec, top: Sequence[Any]) -> list[Arm]:
    """Searched arms from `top` (complete Optuna trials, best first), then the references."""
    confirm = _section(spec)
    searched = [
        Arm(searched_arm(rank), dict(t.params), t.number, float(t.value),
            "capped_at" in t.user_attrs)
        for rank, t in enumerate(top[: confirm.top_k], start=1)
    ]  # fmt: skip
    refs = [Arm(name, dict(keys)) for name, keys in confirm.references.items()]
    return searched + refs


def new_stage(spec: SearchSpec, study_name: str, top: Sequence[Any]) -> Stage:
    """The stage of a search whose complete trials, best first, are `top`."""
    confirm = _section(spec)
    arms = choose_arms(spec, top)
    if len([a for a in arms if a.searched]) == 0 and confirm.top_k > 0:
        raise ConfigError(
            f"{spec.settings.source}: confirm.top_k: {confirm.top_k}, but the study has no "
            "complete trial yet: run the search first"
        )
    return Stage(study_name, spec.metric, spec.threshold, spec.budget, spec.search_seeds,
                 list(confirm.seeds), arms)  # fmt: skip


def _section(spec: SearchSpec) -> ConfirmSection:
    if spec.confirm is None:
        raise ConfigError(f"{spec.settings.source}: has no confirm: section")
    return spec.confirm


def arm_trials(spec: SearchSpec, stage: Stage) -> list[Trial]:
    """Every trial of the stage: each arm's config, once per chunk of seeds, validated; the
    reference arms' trials first."""
    confirm = _section(spec)
    base = {k: v for k, v in spec.base.items() if k not in SEED_KEYS}
    if confirm.max_steps is not None:
        base["train.max_steps"] = confirm.max_steps
    packed = confirm.seeds_per_trial is not None
    trials: list[Trial] = []
    # References first: the no-method baseline is usually the slowest arm, and a trial that
    # starts last sets the stage's end.
    for arm in sorted(stage.arms, key=lambda a: a.searched):
        for chunk in confirm.seed_chunks():
            seeds = {"train.seed": chunk[0], "train.seeds": chunk if packed else None}
            overrides = {**arm.overrides, **seeds}
            where = f"{spec.settings.source}: confirm arm {arm.name}, seeds {chunk}"
            cfg = from_flat({**base, **overrides}, where)
            trials.append(Trial(len(trials), overrides, flatten(cfg), label=arm.name))
    return trials


def grid_doc(spec: SearchSpec, stage: Stage, trials: Sequence[Trial], name: str) -> str:
    """The stage as a grid file (YAML text): the base and, zipped, every key whose value
    differs between trials, so that `sweepgrok status`, `launch --resume` and a reader see the
    stage's trials as a grid's (the arm labels live in arms.json and in the Tune state)."""
    import yaml

    from sweepgrok.config.trial import nest

    flats = [t.flat for t in trials]
    keys = [k for k in flats[0] if len({repr(f[k]) for f in flats}) > 1]
    base = {k: v for k, v in flats[0].items() if k not in keys}
    confirm = _section(spec)
    doc = {
        "name": name, "base": nest(base), "zip": [{k: [f[k] for f in flats] for k in keys}],
        "resources": {"cpu": spec.settings.resources.cpu, "gpu": spec.settings.resources.gpu},
        "max_concurrent": confirm.max_concurrent or spec.max_concurrent,
        "max_failures": spec.settings.max_failures,
        "checkpoint_every": spec.settings.checkpoint_every,
    }  # fmt: skip
    arms = ", ".join(f"{t.label} (seeds {t.flat['train.seeds'] or t.flat['train.seed']})"
                     for t in trials)  # fmt: skip
    head = (f"# The confirm stage of search {stage.study_name} ({spec.settings.source}), as a "
            f"grid: its trials in order are {arms}.\n")  # fmt: skip
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def confirm_dir(sweep_dir: Path) -> Path:
    return Path(sweep_dir) / CONFIRM_DIR


def stage_json(stage: Stage) -> str:
    return json.dumps(asdict(stage), indent=2, default=str) + "\n"


def read_stage(folder: Path) -> Stage | None:
    """The stage recorded in `folder` (a confirm folder), or None when it has none.

    Raises ConfigError naming the file when it is not what sweepgrok wrote."""
    path = Path(folder) / ARMS_FILE
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        arms = [Arm(**a) for a in raw.pop("arms")]
        return Stage(**raw, arms=arms)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ConfigError(
            f"{path}: not a confirm stage's arms file ({err}): move it away, or start the "
            "stage over with --fresh"
        ) from None
