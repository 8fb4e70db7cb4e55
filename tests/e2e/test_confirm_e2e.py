"""`sweepgrok search` with a `confirm:` section end to end on real local Ray: the search, then
its best schedules and a reference re-run on fresh seeds; Ctrl-C (a real SIGINT to the process
group, as a terminal sends it) in the confirm stage keeps the rows and says how to continue;
`sweepgrok confirm --resume` finishes it; the report shows the confirm table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import assert_exactly_once, tiny_tree, wait_until

from sweepgrok.store.sink import read_runs

pytestmark = pytest.mark.slow
SWEEPGROK = str(Path(sys.executable).parent / "sweepgrok")


def write_search(path: Path) -> None:
    base = tiny_tree({
        "geomdr.enabled": True, "geomdr.target_dim": 4, "geometry.enabled": False,
        "train.seed": 101, "train.threads": 1, "train.stop_after_grok": False,
    })  # fmt: skip
    doc = {
        "name": "cf", "base": base, "resources": {"cpu": 1}, "checkpoint_every": 2,
        "search": {"num_samples": 2, "max_concurrent": 2, "seeds_per_trial": 2,
                   "space": {"geomdr.lambda_max": {"loguniform": [0.01, 1.0]}}},
        # Confirm trials of a few seconds each, one at a time: the signal lands mid-stage.
        "confirm": {"top_k": 1, "seeds": [1, 2], "max_steps": 1500, "max_concurrent": 1,
                    "references": {"baseline": {"geomdr.enabled": False}}},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.timeout(600)
def test_ctrl_c_in_the_confirm_stage_then_resume_gives_the_table(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    write_search(tmp_path / "s.yaml")
    stage = tmp_path / "st" / "cf" / "confirm"
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    proc = subprocess.Popen([SWEEPGROK, "search", "s.yaml", "--storage", "st"], cwd=tmp_path,
                            env=ray_env, stdout=out.open("w"), stderr=err.open("w"),
                            start_new_session=True)  # fmt: skip
    try:
        def confirm_running() -> bool:
            assert proc.poll() is None, out.read_text() + err.read_text()
            return any((stage / "metrics").glob("part-*.parquet"))

        wait_until(confirm_running, 400, "the confirm stage's first rows")
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=180) == 130, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    (line,) = [x for x in err.read_text().splitlines() if x.startswith("interrupted (")]
    assert f"the rows measured so far are in {stage}" in line
    assert line.endswith("continue with: sweepgrok confirm s.yaml --storage st --resume")
    arms = json.loads((stage / "arms.json").read_text())
    assert [a["name"] for a in arms["arms"]] == ["search_1", "baseline"]
    assert arms["search_seeds"] == [101, 102] and arms["seeds"] == [1, 2]

    resumed = subprocess.run([SWEEPGROK, "confirm", "s.yaml", "--storage", "st", "--resume"],
                             cwd=tmp_path, env=ray_env, capture_output=True, text=True,
                             timeout=400)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_exactly_once(stage, 4)  # 2 arms x 2 fresh seeds, each row once
    runs = read_runs(stage)
    assert sorted(zip(runs["arm"], runs["train.seed"], strict=True)) == [
        ("baseline", 1), ("baseline", 2), ("search_1", 1), ("search_1", 2)]
    assert "confirm / search" in resumed.stdout and "vs baseline: speed-up [CI]" in resumed.stdout
    summary = json.loads((tmp_path / "st" / "cf" / "search_summary.json").read_text())
    assert summary["confirm"]["confirm_seeds"] == [1, 2]
    assert summary["confirm"]["result"].startswith("search_1 (search objective ")

    status = subprocess.run([SWEEPGROK, "status", str(stage)], env=ray_env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert f"{stage} (grid)" in status.stdout and "trials: 4/4 done" in status.stdout, status

    report = subprocess.run([SWEEPGROK, "report", str(stage), "--out", "rep", "--html"],
                            cwd=tmp_path, env=ray_env, capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert report.returncode == 0, report.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "**Result**: Confirmed on fresh seeds: search_1" in md
    assert "| arm | search objective | n | grokked | KM median [95% CI] | confirm / search |" in md
    assert "winner's curse" in md
    assert "Confirm stage: grok at" in (tmp_path / "rep" / "report.html").read_text()
