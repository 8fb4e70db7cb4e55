"""analysis.provenance_summaries: every committed run summary row names its code commit, dirty
flag, versions, torch build and device, copied from a sweep's real Parquet run rows, or filled
from what the summary itself says, or marked unknown, never guessed; a train summary gets its
config from its trial file only when that file gives every run id."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from analysis import provenance_summaries as provenance
from sweepgrok.config.trial import Config, config_hash, load_config, update
from sweepgrok.store.sink import read_runs

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "fixture_sweep_v0.1.0"


def test_every_committed_summary_row_carries_its_provenance() -> None:
    summaries = sorted((ROOT / "analysis").glob("**/runs.csv"))
    assert len(summaries) >= 12
    for path in summaries:
        runs = pd.read_csv(path)
        for column in provenance.COLUMNS:
            hint = "run python -m analysis.provenance_summaries"
            assert column in runs, f"{path}: no {column}: {hint}"
            assert runs[column].notna().all() and (runs[column] != "").all(), path


def test_the_parquet_rows_provenance_is_copied_per_run(tmp_path: Path) -> None:
    """The fixture sweep's one run was recorded by sweepgrok 0.1.0: its summary gets that
    version and the commit its row holds; a run the Parquet lacks is unknown."""
    rows = read_runs(FIXTURE)
    rid = rows["run_id"].iloc[0]
    summary = pd.DataFrame({"run_id": [rid, "gone"], "git_commit": ["stale", "stale"]})
    out = provenance.add_provenance(summary, rows)
    assert out["sweepgrok_version"].tolist() == ["0.1.0", provenance.UNKNOWN]
    assert out["git_commit"].tolist() == [rows["git_commit"].iloc[0], provenance.UNKNOWN]


def test_code_versions_names_a_mix() -> None:
    mixed = pd.DataFrame({"git_commit": ["a" * 40, "b" * 40, "a" * 40]})
    assert provenance.code_versions(mixed) == "aaaaaaa + bbbbbbb"
    assert provenance.code_versions(pd.DataFrame({"run_id": ["r"]})) == provenance.UNKNOWN


def test_marking_unknown_keeps_every_other_character(tmp_path: Path) -> None:
    path = tmp_path / "somewhere" / "runs.csv"
    path.parent.mkdir()
    text = 'run_id,steps,betas,git_commit\nr1,500,"[0.9, 0.98]",abc\nr2,,"[0.9, 0.98]",\n'
    path.write_text(text)
    provenance.mark_unknown(path)
    u, n = provenance.UNKNOWN, provenance.NOT_RECORDED
    new = "git_dirty,sweepgrok_version,torch_version,torch_build,device,device_name"
    rest = f"{n},{u},{n},{n},{n},{n}"  # sweepgrok_version is code: 'before provenance'
    assert new == ",".join(c for c in provenance.COLUMNS if c != "git_commit")
    assert path.read_text() == (
        f"run_id,steps,betas,git_commit,{new}\n"
        f'r1,500,"[0.9, 0.98]",abc,{rest}\nr2,,"[0.9, 0.98]",{u},{rest}\n'
    )


def test_the_backfill_takes_only_what_the_summary_says(tmp_path: Path) -> None:
    """A GPU's name in an older train summary's device column becomes device_name on cuda; a
    summary named *_cpu ran on cpu (its CPU's model still unknown); nothing else is filled."""
    n = provenance.NOT_RECORDED
    gpu = provenance.backfill({"device": "NVIDIA H200", "device_name": ""}, "paper1_x_h200")
    assert (gpu["device"], gpu["device_name"]) == ("cuda", "NVIDIA H200")
    cpu = provenance.backfill({"device": "", "device_name": "", "torch_version": ""}, "a_cpu")
    assert cpu == {"device": "cpu", "device_name": n, "torch_version": n}
    other = provenance.backfill({"device": "", "git_dirty": "", "steps": ""}, "accelerators")
    assert other == {"device": n, "git_dirty": n, "steps": ""}  # not a provenance column: kept
    kept = provenance.backfill({"device": "cpu", "git_dirty": "False"}, "x")
    assert kept == {"device": "cpu", "git_dirty": "False"}


def quick_train_summary(path: Path, seeds: list[int]) -> Config:
    """A runs.csv as an older train summary held it (run_id, train.seed, model.norm, outcome)
    for trial_quick.yaml's seeds, the run ids the trainer gives them."""
    from sweepgrok.train.trainer import _member_config

    trial = load_config(ROOT / "search_spaces" / "trials" / "trial_quick.yaml")
    cfg = update(trial, {"train.seeds": seeds})
    ids = [config_hash(_member_config(cfg, s)) for s in seeds]
    rows = {"run_id": ids, "train.seed": seeds, "model.norm": [cfg.model.norm] * len(seeds),
            "grok_step": [500.0] * len(seeds), "device": ["NVIDIA H200"] * len(seeds)}
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return trial


def test_a_train_summary_gets_the_config_its_trial_file_gives_every_run_id(tmp_path) -> None:
    path = tmp_path / "train_h200" / "runs.csv"
    trial = quick_train_summary(path, [3, 7])
    provenance.add_train_config(path, trial)
    provenance.mark_unknown(path)
    runs = pd.read_csv(path)
    member = trial.member(7)
    assert runs.loc[1, "task.p"] == member.task.p and runs.loc[1, "model.d_model"] == (
        member.model.d_model
    )
    assert runs["optim.betas"].tolist() == [str(list(member.optim.betas))] * 2
    assert runs["task.data_seed"].tolist() == [0, 0]  # the quick trial's split is fixed
    assert runs["device_name"].tolist() == ["NVIDIA H200"] * 2
    sphere = pd.read_csv(ROOT / "analysis" / "reproduction" / "paper1_sphere" / "runs.csv")
    assert {c for c in sphere if "." in c} <= set(runs)


def test_a_trial_file_that_does_not_give_the_run_ids_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t" / "runs.csv"
    quick_train_summary(path, [3, 7])
    before = path.read_text()
    other = ROOT / "search_spaces" / "trials" / "trial_sphere113.yaml"
    cmd = [sys.executable, "-m", "analysis.provenance_summaries", "--config", str(other),
           str(path.parent)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert "the trial file does not give run ids" in proc.stderr
    assert path.read_text() == before


def test_the_committed_train_summary_has_every_config_column_the_reports_have() -> None:
    """paper1_layernorm_h200 can be filtered like every other summary (its config checked
    against its ten run ids when it was written)."""
    h200 = pd.read_csv(ROOT / "analysis" / "reproduction" / "paper1_layernorm_h200" / "runs.csv")
    sphere = pd.read_csv(ROOT / "analysis" / "reproduction" / "paper1_sphere" / "runs.csv")
    assert {c for c in sphere if "." in c} <= set(h200)
    assert (h200["task.p"] == 113).all() and (h200["optim.lr"] == 1e-4).all()
    assert set(h200["device"]) == {"cuda"} and set(h200["device_name"]) == {"NVIDIA H200"}


def test_the_cli_writes_the_columns_and_exits_2_on_a_missing_summary(tmp_path: Path) -> None:
    folder = tmp_path / "summary"
    folder.mkdir()
    rid = read_runs(FIXTURE)["run_id"].iloc[0]
    pd.DataFrame({"run_id": [rid], "grok_step_95": [100]}).to_csv(folder / "runs.csv", index=False)
    sweep = tmp_path / "sweep"
    shutil.copytree(FIXTURE, sweep)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "analysis.provenance_summaries", *args]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert cli(str(sweep), str(folder)).returncode == 0
    assert pd.read_csv(folder / "runs.csv")["sweepgrok_version"].tolist() == ["0.1.0"]
    missing = cli("--unknown", str(tmp_path / "nothing"))
    assert missing.returncode == 2
    assert (
        missing.stderr.startswith("error: ") and "nothing/runs.csv: no such file" in missing.stderr
    )
