"""The Optuna study of a search: its record in the sweep folder, storage, sampler, results.

The only library module outside ``sweepgrok.tune`` that imports ``optuna``, and only inside the
functions that need it (so the CLI stays fast). The objective it optimizes is defined, and
computed, in ``sweepgrok.objective``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepgrok.objective import compute_saved
from sweepgrok.search_file import Dist, SearchSpec

if TYPE_CHECKING:
    import optuna

STUDY_FILE = "study.json"
"""Sweep-folder file naming the study (so --resume reuses it) and its storage."""
SUMMARY_FILE = "search_summary.json"
BEST_FILE = "best_trial.yaml"
PLOT_FILE = "objective.png"


# ---- the study -----------------------------------------------------------------------------


def fingerprint(spec: SearchSpec) -> str:
    """Digest of what a study's trials depend on (base, space, metric): --resume checks it."""
    blob = json.dumps(
        {
            "base": dict(spec.base),
            "space": [vars(d) for d in spec.space],
            "metric": spec.metric,
            "mode": spec.mode,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def storage_url(sweep_dir: Path, kind: str) -> str:
    """Where the study lives inside the sweep folder (absolute: trials may chdir)."""
    root = sweep_dir.resolve()
    if kind == "journal":
        return str(root / "optuna.journal")
    return f"sqlite:///{root / 'optuna.db'}"


def new_study_record(spec: SearchSpec, sweep_dir: Path) -> dict[str, Any]:
    """A unique study name (name + time + random), so studies never merge in one storage."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return {
        "study_name": f"{spec.name}-{stamp}-{secrets.token_hex(3)}",
        "study_storage": spec.study_storage,
        "storage": storage_url(sweep_dir, spec.study_storage),
        "fingerprint": fingerprint(spec),
        "created": stamp,
    }


def read_study_record(sweep_dir: Path) -> dict[str, Any] | None:
    path = sweep_dir / STUDY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_study_record(sweep_dir: Path, record: Mapping[str, Any]) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    tmp = sweep_dir / f".{STUDY_FILE}.tmp"
    tmp.write_text(json.dumps(dict(record), indent=2) + "\n")
    tmp.replace(sweep_dir / STUDY_FILE)


def open_storage(record: Mapping[str, Any]) -> optuna.storages.BaseStorage:
    """The study's storage object (SQLite RDB, or a JournalFileBackend file)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    if record["study_storage"] == "journal":
        return JournalStorage(JournalFileBackend(record["storage"]))
    return optuna.storages.RDBStorage(record["storage"])


def sampler_seed(seed: int | None, n_existing: int) -> int | None:
    """The seed of a session's sampler: `seed` for a new study, a derived one on --resume.

    A resumed study with the same seed would replay the first session's random start-up
    proposals and sample the same schedules twice.
    """
    if seed is None or n_existing == 0:
        return seed
    return (seed * 1_000_003 + n_existing * 7919) % (2**32)


def make_sampler(spec: SearchSpec, n_existing: int = 0) -> optuna.samplers.BaseSampler:
    """The sampler of `search.sampler`, seeded from `search.seed` (see sampler_seed)."""
    import optuna

    samplers = {
        "tpe": optuna.samplers.TPESampler,
        "random": optuna.samplers.RandomSampler,
        "gp": optuna.samplers.GPSampler,
        "cmaes": optuna.samplers.CmaEsSampler,
    }
    return samplers[spec.sampler](seed=sampler_seed(spec.seed, n_existing))


def trials_in(record: Mapping[str, Any]) -> int:
    """Trials already in the record's study (0 when it does not exist yet)."""
    try:
        return len(load_study(record).get_trials(deepcopy=False))
    except KeyError:  # optuna: no such study in this storage
        return 0


def distribution(dist: Dist) -> optuna.distributions.BaseDistribution:
    """Dist -> the Optuna distribution."""
    from optuna import distributions as d

    if dist.kind == "choice":
        return d.CategoricalDistribution(list(dist.choices))
    if dist.kind == "int":
        return d.IntDistribution(int(dist.low or 0), int(dist.high or 0), log=dist.log)
    return d.FloatDistribution(float(dist.low or 0.0), float(dist.high or 0.0), log=dist.log)


def optuna_space(spec: SearchSpec) -> dict[str, optuna.distributions.BaseDistribution]:
    """Dotted key -> Optuna distribution (Optuna param names are the dotted config keys)."""
    return {d.key: distribution(d) for d in spec.space}


def load_study(record: Mapping[str, Any]) -> optuna.Study:
    import optuna

    return optuna.load_study(study_name=record["study_name"], storage=open_storage(record))


def count_states(study: optuna.Study) -> dict[str, int]:
    """Trials per state name (COMPLETE, RUNNING, FAIL, ...)."""
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


def finished_count(study: optuna.Study) -> int:
    """Trials that will not run again (complete, failed or pruned)."""
    states = count_states(study)
    return sum(v for k, v in states.items() if k not in ("RUNNING", "WAITING"))


def best_value(study: optuna.Study) -> float | None:
    """The best objective so far (seeds the time cap on --resume), or None."""
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    return float(study.best_value)


# ---- results ---------------------------------------------------------------------------------


def top_trials(study: optuna.Study, k: int = 10) -> list[Any]:
    """The k best complete trials, best first."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    sign = 1.0 if study.direction.name == "MINIMIZE" else -1.0
    return sorted(trials, key=lambda t: sign * float(t.value or 0.0))[:k]


def importances(study: optuna.Study) -> dict[str, float] | str:
    """Parameter importances (fANOVA), or the reason they cannot be computed."""
    import optuna
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 4:
        return f"needs at least 4 complete trials (have {len(complete)})"
    if len({t.value for t in complete}) < 2:
        return "every trial has the same objective"
    try:
        return dict(optuna.importance.get_param_importances(study))
    except (RuntimeError, ValueError) as err:
        return f"not computable: {err}"


def best_config_yaml(spec: SearchSpec, study: optuna.Study) -> str:
    """The best trial's schedule as a trial YAML that `sweepgrok train` runs."""
    from sweepgrok.config import dump_yaml

    best = study.best_trial
    cfg = spec.trial_config(best.params)
    head = [
        f"# Best trial of Optuna study {study.study_name} (trial #{best.number}).",
        f"# objective ({spec.metric}, {spec.mode}): {best.value:g}"
        + (f", median over {spec.seeds_per_trial} seeds" if spec.seeds_per_trial > 1 else ""),
        "# searched: " + ", ".join(f"{k}={v}" for k, v in best.params.items()),
    ]
    return "\n".join(head) + "\n" + dump_yaml(cfg)


def summary(
    spec: SearchSpec, study: optuna.Study, saved: Mapping[str, Any], imp: Any
) -> dict[str, Any]:
    """The small JSON summary written beside the Parquet."""
    best = best_value(study)
    return {
        "study_name": study.study_name,
        "metric": spec.metric,
        "mode": spec.mode,
        "budget": spec.budget,
        "threshold": spec.threshold,
        "trials": count_states(study),
        "best_value": best,
        "best_params": study.best_trial.params if best is not None else None,
        "best_trial": study.best_trial.number if best is not None else None,
        "compute": dict(saved),
        "importances": imp,
    }


def trial_values(study: optuna.Study, budget: int) -> list[tuple[int, float, bool]]:
    """(trial number, objective, censored) of complete trials, in trial order (for the plot).

    Censored: stopped by the time cap, or a value above the budget (some run never grokked).
    """
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return [
        (t.number, float(t.value), "capped_at" in t.user_attrs or float(t.value) > budget)
        for t in trials
        if t.value is not None
    ]


@dataclass
class Results:
    """Everything `sweepgrok search` prints and writes at the end of a session."""

    study: Any
    top: list[Any]
    importances: dict[str, float] | str
    compute: dict[str, Any]
    summary: dict[str, Any]
    best_yaml: Path | None = None
    plot: Path | None = None
    plot_error: str | None = None


def finish(
    spec: SearchSpec, sweep_dir: Path, record: Mapping[str, Any], top_k: int = 10
) -> Results:
    """Write best_trial.yaml, the summary JSON and the plot; return what the CLI prints.

    Compute accounting reads the sweep's Parquet runs/ (the record across every session).
    """
    from sweepgrok.sink import read_runs

    study = load_study(record)
    runs = read_runs(sweep_dir)
    saved = compute_saved(runs.to_dict("records"))
    imp = importances(study)
    res = Results(study, top_trials(study, top_k), imp, saved, summary(spec, study, saved, imp))
    (sweep_dir / SUMMARY_FILE).write_text(json.dumps(res.summary, indent=2, default=str) + "\n")
    if res.summary["best_value"] is None:
        return res
    res.best_yaml = sweep_dir / BEST_FILE
    res.best_yaml.write_text(best_config_yaml(spec, study))
    try:
        from sweepgrok.plots import plot_objective

        res.plot = plot_objective(
            trial_values(study, spec.budget),
            sweep_dir / PLOT_FILE,
            budget=spec.budget,
            mode=spec.mode,
            title=f"{study.study_name}: {spec.metric} ({spec.mode})",
        )
    except ImportError as err:  # matplotlib is a dependency, but a slim install may lack it
        res.plot_error = str(err)
    return res
