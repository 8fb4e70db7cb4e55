"""The `confirm:` section of a search file: which schedules to re-run on fresh seeds.

The best of many trials scored on a few seeds is partly the luckiest (the winner's curse). The
confirm stage re-runs the top-k searched schedules and named reference arms on seeds the search
never used, so their comparison is free of the selection::

    confirm:
      top_k: 3                         # searched arms search_1 .. search_3, by search objective
      seeds: [1, 2, 3, 4, 5, 6, 7, 8]  # fresh: never used by the search (checked)
      seeds_per_trial: 4               # pack seeds per trial (optional)
      max_steps: 30000                 # the arms' budget (default: the search's)
      references:                      # named arms: config overrides of the search's base
        baseline: {geomdr.enabled: false}
        paper: {geomdr.target_dim: 32, geomdr.start_step: 2000}

Validation of the arms against the base is `sweepgrok.config.search_file`'s (it knows the base).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, model_validator

from sweepgrok.config.grid_file import FILE_CONFIG, MAX_CONCURRENT, ConfigKey, seed_values
from sweepgrok.config.trial import MAX_SEEDS, MAX_STEPS, SEED_KEYS

SEARCHED_PREFIX = "search_"
"""Searched arms are named search_1 .. search_k (rank by search objective, best first)."""
MAX_TOP_K = 20
"""Most searched arms: each costs as many runs as there are confirm seeds."""


def searched_arm(rank: int) -> str:
    """The name of the searched arm of rank `rank` (1 = the search's best)."""
    return f"{SEARCHED_PREFIX}{rank}"


def _arm_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,39}", name):
        raise ValueError(
            f"an arm name is a letter, then letters, digits, '_' or '-' (got {name!r})"
        )
    if re.fullmatch(SEARCHED_PREFIX + r"\d+", name):
        raise ValueError(f"{name!r} names a searched arm: give the reference another name")
    return name


def _no_seed_keys(overrides: Mapping[str, Any]) -> Mapping[str, Any]:
    seeds = [k for k in overrides if k in SEED_KEYS]
    if seeds:
        raise ValueError(f"{seeds[0]}: a reference's seeds are confirm.seeds (remove it)")
    return overrides


Reference = Annotated[dict[ConfigKey, Any], AfterValidator(_no_seed_keys)]
"""A reference arm: dotted config keys applied to the search's base (not the searched values)."""


class ConfirmSection(BaseModel):
    """The `confirm:` section: the arms re-run on fresh seeds once the search has ended."""

    model_config = FILE_CONFIG

    top_k: int = Field(3, ge=0, le=MAX_TOP_K)
    """Searched arms: the k best complete trials by search objective (search_1 is the best)."""
    seeds: Annotated[list[int], BeforeValidator(seed_values), Field(min_length=2)]
    """Fresh init seeds, the same for every arm (at least 2); none may be a search seed."""
    seeds_per_trial: int | None = Field(None, ge=1, le=MAX_SEEDS)
    """Pack that many seeds per trial (train.seeds, in lockstep); null: one seed per trial."""
    max_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    """Every arm's budget (train.max_steps); null: the search's."""
    max_concurrent: int | None = Field(None, ge=1, le=MAX_CONCURRENT)
    """Trials at once; null: the search's."""
    references: dict[Annotated[str, AfterValidator(_arm_name)], Reference] = {}
    """Named arms, each the search's base with these dotted keys set (e.g. the paper's
    schedule, the no-GeomDR baseline); compared with every searched arm."""

    @model_validator(mode="after")
    def _some_arm(self) -> ConfirmSection:
        if self.top_k + len(self.references) < 2:
            raise ValueError("needs at least two arms (top_k plus references) to compare")
        return self

    def seed_chunks(self) -> list[list[int]]:
        """The seeds of each trial of one arm."""
        k = self.seeds_per_trial or 1
        return [self.seeds[i : i + k] for i in range(0, len(self.seeds), k)]


def reused_seeds(confirm: ConfirmSection, search_seeds: Sequence[int]) -> list[int]:
    """The confirm seeds the search also used (they must be none)."""
    used = set(search_seeds)
    return [s for s in confirm.seeds if s in used]
