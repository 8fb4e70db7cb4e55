"""The Optuna study of a search: its record in the sweep folder, storage, sampler, results.

The only library module outside ``sweepgrok.tune`` that imports ``optuna``, and only inside the
functions that need it (so the CLI stays fast). The objective it optimizes is defined, and
computed, in ``sweepgrok.search.objective``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from sweepgrok.config.search_file import Dist, SearchSpec, StudyStorage
from sweepgrok.config.trial import ConfigError
from sweepgrok.core.interrupt import critical
from sweepgrok.search.objective import compute_saved
from sweepgrok.store.sweepdir import FolderError, check_sweep_path, delete_sweep_folder, has_runs

if TYPE_CHECKING:
    import optuna

log = logging.getLogger(__name__)

STUDY_FILE = "study.json"
"""Sweep-folder file naming the study (so --resume reuses it) and its storage."""
STUDY_STORAGES: tuple[str, ...] = get_args(StudyStorage)
"""Where a study may live: the sweep folder's optuna.db, or its optuna.journal."""
_DAMAGED = "not a study record (fix it, or --fresh deletes the sweep folder and starts over)"
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
            # Only when not the default: studies begun before the option keep their digest.
            **({"objective": spec.objective} if spec.objective != "median" else {}),
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


DASHBOARD_HOST = "127.0.0.1"
"""optuna-dashboard listens on loopback only: it can edit and delete the study's trials."""
DASHBOARD_PORT = 8080
DASHBOARD_EXTRA = "pip install 'sweepgrok[dashboard]'"


def dashboard_command(record: Mapping[str, Any], port: int = DASHBOARD_PORT) -> list[str]:
    """The optuna-dashboard command line that serves the record's study (an absolute storage
    path, so it runs from any directory; a journal file is recognised by its path)."""
    host = ["--host", DASHBOARD_HOST, "--port", str(port)]
    return ["optuna-dashboard", str(record["storage"]), *host]


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
    """The sweep's study record (None when it has none), its storage always the sweep's own.

    The record names the study; its ``storage`` is not trusted: a study lives only in the sweep
    folder's own ``optuna.db`` or ``optuna.journal`` (so a moved folder still finds its study,
    and an edited record cannot point Optuna at another database). Raises ConfigError naming
    the file when it is not a study record.
    """
    path = sweep_dir / STUDY_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ConfigError(f"{path}: {_DAMAGED}: {err}") from None
    if not isinstance(record, dict):
        got = type(record).__name__
        raise ConfigError(f"{path}: {_DAMAGED}: a JSON object expected, got {got}")
    name, kind = record.get("study_name"), record.get("study_storage")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: study_name: {_DAMAGED}: a study name expected, got {name!r}")
    if kind not in STUDY_STORAGES:
        raise ConfigError(
            f"{path}: study_storage: {_DAMAGED}: one of {', '.join(STUDY_STORAGES)} expected, "
            f"got {kind!r}"
        )
    own = storage_url(sweep_dir, kind)
    if record.get("storage") != own:
        log.warning("%s: storage %r ignored: the study is the sweep's own %s", path,
                    record.get("storage"), own)
    return {**record, "storage": own}


def write_study_record(sweep_dir: Path, record: Mapping[str, Any]) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    tmp = sweep_dir / f".{STUDY_FILE}.tmp"
    with critical():
        tmp.write_text(json.dumps(dict(record), indent=2) + "\n")
        tmp.replace(sweep_dir / STUDY_FILE)


def create_owner_only(path: Path) -> None:
    """Create `path` empty and readable by its owner only (0600), unless it exists.

    The study's file holds every trial; created here first, SQLite and Optuna's journal keep
    its mode (SQLite gives its -journal and -wal files the mode of the database too)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def open_storage(record: Mapping[str, Any]) -> optuna.storages.BaseStorage:
    """The study's storage object (SQLite RDB, or a JournalFileBackend file), owner-only."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    url = str(record["storage"])
    if record["study_storage"] == "journal":
        create_owner_only(Path(url))
        return JournalStorage(JournalFileBackend(url))
    create_owner_only(Path(url.removeprefix("sqlite:///")))  # an empty file is an empty database
    return optuna.storages.RDBStorage(url)


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


MIN_IMPORTANCE_TRIALS = 20
"""Complete trials below which no importance is shown (a floor we chose, not a derived one):
PED-ANOVA compares the best 10% of the trials with all of them, which is 2 trials at 20, and
each trial is scored on a few seeds. Above it the bootstrap spread says how far to trust each
value."""
IMPORTANCE_RESAMPLES = 20
"""Bootstrap resamples of the trials behind each importance's spread."""
IMPORTANCE_CAVEAT = (
    "Importance (PED-ANOVA, Optuna's default): how much each key's values among the best 10% "
    "of these trials differ from its values over all of them, normalized to sum to 1 (the "
    "spread: 2.5-97.5% over bootstrap resamples of the trials). It says which keys the best "
    "trials of this search had in common, within the searched ranges; not how a key acts "
    "elsewhere, and a trial's objective carries its seeds' noise."
)
"""What parameter importances can and cannot say (printed and in search_summary.json)."""


def importances(study: optuna.Study) -> dict[str, dict[str, float]] | str:
    """Parameter importances (PED-ANOVA) with their bootstrap spread over the complete trials:
    {key: {"importance", "lo", "hi"}}; or the reason they are not shown."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < MIN_IMPORTANCE_TRIALS:
        return (
            f"not shown below {MIN_IMPORTANCE_TRIALS} complete trials (have {len(complete)}): "
            "too few to tell a key's effect from the seeds' noise"
        )
    if len({t.value for t in complete}) < 2:
        return "every trial has the same objective"
    try:
        point = _importances(study.direction, complete)
        boots = [
            _importances(study.direction, _resample(complete, i))
            for i in range(1, IMPORTANCE_RESAMPLES + 1)
        ]
    except (RuntimeError, ValueError) as err:
        return f"not computable: {err}"
    return {key: _spread(value, [b.get(key, 0.0) for b in boots]) for key, value in point.items()}


def _importances(direction: Any, trials: Sequence[Any]) -> dict[str, float]:
    """Optuna's default evaluator (PED-ANOVA, deterministic) on an in-memory study of `trials`."""
    import optuna

    study = optuna.create_study(direction=direction)
    study.add_trials(trials)
    return dict(optuna.importance.get_param_importances(study))


def _resample(trials: Sequence[Any], seed: int) -> list[Any]:
    import random

    rng = random.Random(seed)
    return [trials[rng.randrange(len(trials))] for _ in trials]


def _spread(value: float, boots: Sequence[float]) -> dict[str, float]:
    import numpy as np

    lo, hi = np.quantile(np.asarray(boots, float), [0.025, 0.975], method="inverted_cdf")
    return {"importance": float(value), "lo": float(lo), "hi": float(hi)}


def best_config_yaml(spec: SearchSpec, study: optuna.Study) -> str:
    """The best trial's schedule as a trial YAML that `sweepgrok train` runs."""
    from sweepgrok.config.trial import dump_yaml

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
        "importances_note": IMPORTANCE_CAVEAT,
        "search_seeds": spec.search_seeds,
        "confirm_seeds": list(spec.confirm.seeds) if spec.confirm is not None else None,
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


def prepare_search_folder(
    spec: SearchSpec, sweep_dir: Path, *, resume: bool, fresh: bool
) -> dict[str, Any]:
    """The study to use: the folder's own on ``resume``, else a new uniquely named one.

    ``fresh`` deletes the folder first. Raises FolderError when the folder holds another sweep,
    a study without ``resume``, or a study whose search changed since it began.
    """
    if fresh:
        delete_sweep_folder(sweep_dir)
    check_sweep_path(sweep_dir)
    record = read_study_record(sweep_dir)
    if record is None:
        if has_runs(sweep_dir):
            raise FolderError(
                f"{sweep_dir}: holds a sweep that is not an Optuna search: use --fresh "
                "to delete it, or another name / --storage"
            )
        return new_study_record(spec, sweep_dir)
    if not resume:
        raise FolderError(
            f"{sweep_dir}: already holds study {record['study_name']}: pass --resume to "
            "continue it, or --fresh to delete it and start over"
        )
    if record.get("fingerprint") != fingerprint(spec):
        raise FolderError(
            f"{spec.settings.source}: base, search.space, metric or mode changed since "
            f"study {record['study_name']} began: --fresh starts a new study"
        )
    return record


@dataclass
class Results:
    """Everything `sweepgrok search` prints and writes at the end of a session."""

    study: Any
    top: list[Any]
    importances: dict[str, dict[str, float]] | str
    compute: dict[str, Any]
    summary: dict[str, Any]
    best_yaml: Path | None = None
    plot: Path | None = None
    plot_error: str | None = None


def finish(
    spec: SearchSpec, sweep_dir: Path, record: Mapping[str, Any], top_k: int = 10
) -> Results:
    """Write best_trial.yaml and the summary JSON; return what the CLI prints (which draws the
    plot: figures belong to sweepgrok.analysis).

    Compute accounting reads the sweep's Parquet runs/ (the record across every session).
    """
    from sweepgrok.store.sink import read_runs

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
    return res
