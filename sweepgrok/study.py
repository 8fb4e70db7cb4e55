"""Optuna searches: the censored objective, the exact time cap, the persistent study, results.

The only module of sweepgrok that imports ``optuna``, and only inside the functions that need it:
the pure helpers (objective, time cap, compute accounting) run inside Ray trials too.

Objective of one run (at threshold theta of ``search.metric``, budget B = train.max_steps)::

    grokked            ->  its grok step g                         (g <= steps_run <= B)
    censored at step c ->  c + B * (theta - peak_test_acc)          (> c; c = B, or the cap)
    diverged / failed  ->  B * (1 + theta)                          (the worst finite value)

A run censored at its budget scores ``B * (1 + theta - peak)``: above every grokked run, and a
run that came closer to grokking (higher peak test accuracy) ranks better. A run stopped by the
time cap at step c scores above c, hence above the best value it could not beat, but it is not
pushed to the budget: TPE / GP still see that it was a near miss. Never NaN or inf (Optuna
drops such trials as failed). With ``seeds_per_trial`` k, a trial's objective is the median
over its k runs (``statistics.median``: the mean of the two middle values when k is even).

Exact time cap (minimizing): while a trial runs, every run's value is bounded below: a finished
run's value is known, an unfinished one will be > the current step s (it groks later than s, or
is censored at c >= s with value > c). The median is monotone in each value, so
``median(lower bounds)`` bounds the trial's objective. Once it reaches ``best * margin`` (best =
the lowest objective of any finished trial) the trial cannot win: its unfinished runs are
stopped at s and recorded censored there (``EvalReport.stop``). No trial that could still win is
ever stopped; ASHA / median stopping are not used (they rank on accuracy, which sits at chance
until a run groks, and would kill the runs that grok late but fastest in the end).
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweepgrok.search_file import Dist, SearchSpec

if TYPE_CHECKING:
    import optuna

STUDY_FILE = "study.json"
"""Sweep-folder file naming the study (so --resume reuses it) and its storage."""
SUMMARY_FILE = "search_summary.json"
BEST_FILE = "best_trial.yaml"
PLOT_FILE = "objective.png"
OBJECTIVE = "objective"
"""Result key Tune and Optuna optimize (min or max of the objective defined above)."""
FINAL = "objective_final"
"""Result key: true once every run of the trial has ended (the objective is exact)."""


# ---- the censored objective -------------------------------------------------------------------


def worst_value(budget: int, theta: float) -> float:
    """The value of a diverged or failed run: worse than any censored one."""
    return float(budget) * (1.0 + theta)


def _finite(x: Any, default: float) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def censored_value(steps: int, peak_test_acc: Any, budget: int, theta: float) -> float:
    """A run censored at `steps`: steps + B * (theta - peak), peak clipped to [0, theta]."""
    peak = min(max(_finite(peak_test_acc, 0.0), 0.0), theta)
    return float(steps) + float(budget) * (theta - peak)


def run_value(row: Mapping[str, Any], metric: str, theta: float, budget: int) -> float:
    """The objective of one finished run from its runs/ row (see the module docstring)."""
    status = row.get("status")
    if status in ("diverged", "failed"):
        return worst_value(budget, theta)
    grok = row.get(metric)
    if grok is not None and math.isfinite(float(grok)):
        return float(grok)
    steps = int(_finite(row.get("steps_run"), float(budget)))
    return censored_value(steps, row.get("peak_test_acc"), budget, theta)


def trial_value(values: Sequence[float]) -> float:
    """A trial's objective: the median over its runs (one value per init seed)."""
    return float(statistics.median(values))


@dataclass
class _Run:
    first_at_theta: int | None = None
    peak: float = 0.0
    value: float | None = None  # set when the run has ended


@dataclass
class TrialProgress:
    """The objective of one running trial, evaluation by evaluation (runs inside the trial).

    Fed with each EvalReport's metric rows (active runs) and finished rows (runs that ended).
    """

    run_ids: list[str]
    metric: str
    theta: float
    budget: int
    runs: dict[str, _Run] = field(default_factory=dict)
    capped_at: int | None = None

    def __post_init__(self) -> None:
        for rid in self.run_ids:
            self.runs.setdefault(rid, _Run())

    def observe(self, metrics: Iterable[Mapping[str, Any]]) -> None:
        """One evaluation's metric rows: first step at theta and peak test accuracy."""
        for row in metrics:
            run = self.runs.get(str(row["run_id"]))
            if run is None:
                continue
            acc = _finite(row.get("test_acc"), 0.0)
            run.peak = max(run.peak, acc)
            if run.first_at_theta is None and acc >= self.theta:
                run.first_at_theta = int(row["step"])

    def finish(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Run rows of runs that ended: their values are final."""
        for row in rows:
            run = self.runs.get(str(row["run_id"]))
            if run is not None:
                run.value = run_value(row, self.metric, self.theta, self.budget)

    @property
    def done(self) -> bool:
        return all(r.value is not None for r in self.runs.values())

    def _bound(self, run: _Run, step: int) -> float:
        if run.value is not None:
            return run.value
        if run.first_at_theta is not None:  # grokked at the metric's theta, still training
            return float(run.first_at_theta)
        return float(step)  # it will grok after `step`, or be censored at c >= step

    def lower_bound(self, step: int) -> float:
        """A lower bound on the trial's objective; exact once every run has ended."""
        return trial_value([self._bound(r, step) for r in self.runs.values()])

    def to_cap(self, step: int, best: float | None, margin: float) -> list[str]:
        """Runs to stop now: those still open, if the trial can no longer beat best * margin."""
        if best is None or not math.isfinite(best) or self.done:
            return []
        if self.lower_bound(step) < best * margin:
            return []
        self.capped_at = step
        return [rid for rid, r in self.runs.items() if r.value is None and r.first_at_theta is None]

    def state(self) -> dict[str, Any]:
        """Plain dict for the trial checkpoint (a retried trial resumes its bookkeeping)."""
        return {
            "runs": {k: vars(v) for k, v in self.runs.items()},
            "capped_at": self.capped_at,
        }

    def load(self, state: Mapping[str, Any]) -> None:
        self.runs = {k: _Run(**v) for k, v in state["runs"].items()}
        self.capped_at = state.get("capped_at")


# ---- compute accounting ------------------------------------------------------------------------


def is_capped(row: Mapping[str, Any]) -> bool:
    """A run the time cap stopped: censored before its budget."""
    steps, budget = row.get("steps_run"), row.get("train.max_steps")
    if row.get("status") != "censored" or steps is None or budget is None:
        return False
    return int(steps) < int(budget)


def compute_saved(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Steps run vs steps the runs would have run without the time cap.

    A capped run counts its whole budget in the counterfactual (an upper bound: it might have
    grokked earlier and stopped); every other run counts what it ran. One run = one init seed.
    """
    run = without = capped = n = 0
    for row in rows:
        n += 1
        steps = int(_finite(row.get("steps_run"), 0.0))
        run += steps
        if is_capped(row):
            capped += 1
            without += int(row["train.max_steps"])
        else:
            without += steps
    saved = 1.0 - run / without if without else 0.0
    return {
        "runs": n,
        "capped_runs": capped,
        "steps_run": run,
        "steps_without_cap": without,
        "saved_fraction": round(saved, 4),
    }


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
        from sweepgrok.search_plots import plot_objective

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
