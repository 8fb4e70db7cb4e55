"""Search files, the censored objective, the time-cap rule, compute accounting, results (no Ray)."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from conftest import SEARCH_BASE as BASE
from conftest import SEARCH_SPACE as SPACE
from conftest import write_search as write

from sweepgrok.config.search_file import load_search
from sweepgrok.config.trial import ConfigError, load_config
from sweepgrok.search import objective
from sweepgrok.search import study as S

ROOT = Path(__file__).resolve().parents[2]


# ---- search files ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["quick_optuna.yaml", "geomdr_optuna.yaml"])
def test_shipped_search_files_load(name):
    spec = load_search(ROOT / "search_spaces" / "searches" / name)
    assert spec.mode == "min" and spec.metric == "grok_step" and spec.time_cap
    assert {d.key for d in spec.space} >= {"geomdr.lambda_max", "geomdr.start_step"}
    assert spec.base["geomdr.enabled"] is True


def test_defaults_and_fields(tmp_path):
    spec = load_search(write(tmp_path))
    assert (spec.metric, spec.mode, spec.sampler, spec.study_storage) == (
        "grok_step",
        "min",
        "tpe",
        "sqlite",
    )
    assert spec.budget == 1000 and spec.threshold == spec.base["train.grok_threshold"]
    assert spec.seeds_per_trial == 1 and spec.base["train.seeds"] is None
    lam = spec.space[0]
    assert (lam.kind, lam.low, lam.high, lam.log) == ("loguniform", 0.01, 1.0, True)
    assert spec.with_overrides(num_samples=3, max_concurrent=None).num_samples == 3
    cfg = spec.trial_config({"geomdr.start_step": 7})
    assert cfg.geomdr.start_step == 7 and cfg.geomdr.enabled


def test_base_path_is_relative_to_the_search_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "trial.yaml").write_text(yaml.safe_dump(BASE))
    path = tmp_path / "sub" / "search.yaml"
    path.write_text(yaml.safe_dump({"base": "trial.yaml", "search": {"space": SPACE}}))
    spec = load_search(path)
    assert spec.name == "search" and spec.budget == 1000


def test_seeds_per_trial_packs_the_same_seeds_in_every_trial(tmp_path):
    spec = load_search(write(tmp_path, {"seeds_per_trial": 3}))
    assert spec.base["train.seeds"] == [0, 1, 2]
    assert spec.trial_config({}).train.seed_list == [0, 1, 2]


BAD = [
    ({"space": {"geomdr.lambda_maxx": {"uniform": [0, 1]}}}, "geomdr.lambda_maxx"),
    ({"space": {"geomdr.lambda_max": {"normal": [0, 1]}}}, "uniform, loguniform, int, choice"),
    ({"space": {"geomdr.lambda_max": {"uniform": [1, 1]}}}, "lo must be < hi"),
    ({"space": {"geomdr.lambda_max": {"uniform": [2, 1]}}}, "geomdr.lambda_max.uniform"),
    ({"space": {"geomdr.lambda_max": {"loguniform": [0, 1]}}}, "lo must be > 0"),
    ({"space": {"model.norm": {"choice": []}}}, "model.norm.choice"),
    ({"space": {"model.norm": {"choice": ["none", "cube"]}}}, "model.norm"),
    ({"space": {"geomdr.lambda_max": {"uniform": [-1, 1]}}}, "value -1"),
    ({"space": {"geomdr.target_dim": {"int": [0.5, 8]}}}, "two integers"),
    ({"space": {"geomdr.target_dim": {"int": [0, 8], "log": True}}}, ">= 1 with log"),
    ({"space": {"geomdr.lambda_max": {"uniform": [0, 1], "log": True}}}, "log belongs to int"),
    ({"space": {"train.max_steps": {"int": [10, 20]}}}, "train.max_steps"),
    ({"space": {}}, "search.space"),
    ({"metric": "loss"}, "grok_step, grok_step_95, grok_step_99"),
    ({"mode": "fast"}, "search.mode"),
    ({"sampler": "hyperband"}, "tpe, random, gp, cmaes"),
    ({"num_samples": 0}, "search.num_samples"),
    ({"time_cap_margin": 0.5}, "search.time_cap_margin"),
    ({"study_storage": "redis"}, "sqlite, journal"),
    ({"budget": 3}, "search.budget"),
]


@pytest.mark.parametrize(("search", "needle"), BAD, ids=[n for _, n in BAD])
def test_bad_search_files_name_the_key(tmp_path, search, needle):
    space = search.pop("space", SPACE)
    path = write(tmp_path, {**search, "space": space})
    with pytest.raises(ConfigError) as err:
        load_search(path)
    assert needle in str(err.value) and str(path) in str(err.value)


def test_unknown_top_level_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'grid'"):
        load_search(write(tmp_path, grid={"model.norm": ["none"]}))


def test_searching_geomdr_with_geomdr_off_is_an_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump({"base": {"train": {"max_steps": 100}}, "search": {"space": SPACE}})
    )
    with pytest.raises(ConfigError, match=r"geomdr.enabled: false"):
        load_search(path)


def test_metric_above_the_stopping_threshold_is_an_error(tmp_path):
    base = {**BASE, "train": {"max_steps": 100, "grok_threshold": 0.95}}
    with pytest.raises(ConfigError, match=r"search\.metric: grok_step_99"):
        load_search(write(tmp_path, {"metric": "grok_step_99"}, base=base))


def test_missing_sampler_extra_names_the_package(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cmaes" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"search.sampler: cmaes needs the 'cmaes' package"):
        load_search(write(tmp_path, {"sampler": "cmaes"}))


# ---- the censored objective ----------------------------------------------------------------


def row(status: str, grok: int | None, steps: int, peak: float, budget: int = 1000) -> dict:
    return {
        "status": status,
        "grok_step": grok,
        "steps_run": steps,
        "peak_test_acc": peak,
        "train.max_steps": budget,
    }


def test_censored_objective_is_finite_and_ordered():
    theta, budget = 0.99, 1000
    values = [
        objective.run_value(row("grokked", 200, 200, 1.0), "grok_step", theta, budget),
        objective.run_value(row("completed", 900, 1000, 1.0), "grok_step", theta, budget),
        objective.run_value(row("censored", None, 1000, 0.9), "grok_step", theta, budget),
        objective.run_value(row("censored", None, 1000, 0.5), "grok_step", theta, budget),
        objective.run_value(row("censored", None, 1000, float("nan")), "grok_step", theta, budget),
        objective.run_value(row("diverged", None, 300, float("nan")), "grok_step", theta, budget),
    ]
    assert all(math.isfinite(v) for v in values)
    assert values == sorted(values) and values[-1] == objective.worst_value(budget, theta)
    assert values[2] == pytest.approx(budget * (1 + theta - 0.9))  # the documented formula
    assert values[0] == 200 and values[2] > budget


def test_a_capped_run_scores_above_its_cap_but_below_a_budget_failure():
    capped = objective.run_value(row("censored", None, 300, 0.5), "grok_step", 0.99, 1000)
    failure = objective.run_value(row("censored", None, 1000, 0.5), "grok_step", 0.99, 1000)
    assert 300 < capped < failure


def test_trial_value_is_the_median_over_seeds():
    assert objective.trial_value([300, 5000, 400]) == 400
    assert objective.trial_value([300, 500]) == 400


# ---- the time cap --------------------------------------------------------------------------


def metrics(step: int, accs: dict[str, float]) -> list[dict]:
    return [{"run_id": r, "step": step, "test_acc": a} for r, a in accs.items()]


def test_time_cap_one_seed():
    p = objective.TrialProgress(["a"], "grok_step", 0.99, 1000)
    p.observe(metrics(250, {"a": 0.4}))
    assert p.lower_bound(250) == 250 and p.to_cap(250, best=300, margin=1.0) == []
    p.observe(metrics(300, {"a": 0.5}))
    assert p.to_cap(300, best=300, margin=1.0) == ["a"] and p.capped_at == 300
    p2 = objective.TrialProgress(["a"], "grok_step", 0.99, 1000)
    assert p2.to_cap(5000, best=None, margin=1.0) == []
    assert p2.to_cap(300, best=300, margin=1.5) == []  # the margin delays the cap


def test_time_cap_median_of_three_seeds():
    p = objective.TrialProgress(["a", "b", "c"], "grok_step", 0.99, 1000)
    p.observe(metrics(100, {"a": 1.0, "b": 0.3, "c": 0.2}))
    p.finish([{**row("grokked", 100, 100, 1.0), "run_id": "a"}])
    # bounds (100, 200, 200): median 200 < best 250 -> keep going
    assert p.to_cap(200, best=250, margin=1.0) == []
    # bounds (100, 250, 250): the median cannot drop below 250 any more
    assert sorted(p.to_cap(250, best=250, margin=1.0)) == ["b", "c"]
    p.finish([{**row("censored", None, 250, 0.3), "run_id": r} for r in ("b", "c")])
    assert p.done and p.lower_bound(250) >= 250


def test_progress_state_round_trips():
    p = objective.TrialProgress(["a", "b"], "grok_step", 0.99, 1000)
    p.observe(metrics(50, {"a": 0.995, "b": 0.1}))
    q = objective.TrialProgress(["a", "b"], "grok_step", 0.99, 1000)
    q.load(p.state())
    assert q.runs == p.runs and q.lower_bound(60) == p.lower_bound(60)


# ---- compute accounting ----------------------------------------------------------------------


def test_compute_saved_counts_capped_runs_at_their_budget():
    rows = [
        row("grokked", 300, 300, 1.0),
        row("censored", None, 300, 0.4),  # capped
        row("censored", None, 1000, 0.4),  # ran its budget: not capped
        row("diverged", None, 120, 0.1),
    ]
    out = objective.compute_saved(rows)
    assert out["capped_runs"] == 1 and out["runs"] == 4
    assert out["steps_run"] == 300 + 300 + 1000 + 120
    assert out["steps_without_cap"] == 300 + 1000 + 1000 + 120
    assert out["saved_fraction"] == pytest.approx(1 - 1720 / 2420, abs=1e-4)
    assert objective.compute_saved([])["saved_fraction"] == 0.0


# ---- results, without Ray ------------------------------------------------------------------


def fake_study(spec: Any, values: list[float]) -> optuna.Study:
    study = optuna.create_study(direction="minimize", study_name="t")
    dists = S.optuna_space(spec)
    for i, v in enumerate(values):
        params = {"geomdr.lambda_max": 0.01 * (i + 1), "geomdr.start_step": 10 * i}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=v))
    return study


def test_best_trial_yaml_loads_and_has_the_best_schedule(tmp_path):
    spec = load_search(write(tmp_path))
    study = fake_study(spec, [700.0, 250.0, 1500.0])
    path = tmp_path / "best.yaml"
    path.write_text(S.best_config_yaml(spec, study))
    cfg = load_config(path)
    assert cfg.geomdr.lambda_max == pytest.approx(0.02) and cfg.geomdr.start_step == 10
    assert [t.number for t in S.top_trials(study, 2)] == [1, 0]


def test_importances_need_enough_trials_and_carry_their_bootstrap_spread(tmp_path):
    spec = load_search(write(tmp_path))
    few = S.importances(fake_study(spec, [float(v) for v in range(S.MIN_IMPORTANCE_TRIALS - 1)]))
    assert isinstance(few, str) and f"have {S.MIN_IMPORTANCE_TRIALS - 1}" in few
    # The objective follows start_step alone (10 * i) plus a little of lambda_max's order.
    values = [10.0 * i + (i % 3) for i in range(S.MIN_IMPORTANCE_TRIALS)]
    imp = S.importances(fake_study(spec, values))
    assert isinstance(imp, dict) and set(imp) == {"geomdr.lambda_max", "geomdr.start_step"}
    for v in imp.values():
        assert set(v) == {"importance", "lo", "hi"} and 0 <= v["lo"] <= v["hi"] <= 1
    assert sum(v["importance"] for v in imp.values()) == pytest.approx(1.0)
    assert imp == S.importances(fake_study(spec, values))  # seeded


def test_interrupted_trials_are_adopted_and_the_surplus_marked_failed_with_a_log(
    caplog, monkeypatch
):
    from sweepgrok.tune.search import settle_interrupted

    monkeypatch.setattr(logging.getLogger("sweepgrok"), "propagate", True)  # CLI turns it off
    study = optuna.create_study(direction="minimize")
    study.add_trial(optuna.trial.create_trial(value=1.0))  # finished in the first session
    running = [study.ask()._trial_id for _ in range(3)]  # left RUNNING by an interrupted one
    with caplog.at_level(logging.INFO, logger="sweepgrok"):
        adopt, remaining = settle_interrupted(study, num_samples=3)
    assert adopt == running[:2] and remaining == 2
    states = [t.state.name for t in study.get_trials()]
    assert states == ["COMPLETE", "RUNNING", "RUNNING", "FAIL"]
    text = caplog.text
    assert "re-running 2 trial(s)" in text and "marked 1 trial(s)" in text
    assert "num_samples=3" in text


def test_sampler_reseeds_on_resume():
    assert S.sampler_seed(0, 0) == 0 and S.sampler_seed(None, 5) is None
    assert S.sampler_seed(0, 5) != S.sampler_seed(0, 6) != 0


# ---- the optuna-dashboard command -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_dashboard_command_opens_the_sweeps_own_study_in_optuna_dashboard(tmp_path, kind):
    from optuna_dashboard._storage_url import get_storage  # how optuna-dashboard reads its arg

    spec = load_search(write(tmp_path, {"study_storage": kind}, storage=str(tmp_path / "out")))
    record = S.new_study_record(spec, spec.sweep_dir())
    S.write_study_record(spec.sweep_dir(), record)
    optuna.create_study(storage=S.open_storage(record), study_name=record["study_name"])
    command = S.dashboard_command(record, port=8123)
    assert command[0] == "optuna-dashboard"
    assert command[2:] == ["--host", "127.0.0.1", "--port", "8123"]
    summaries = get_storage(command[1]).get_all_studies()
    assert [s.study_name for s in summaries] == [record["study_name"]]
