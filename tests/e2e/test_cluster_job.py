"""The README's `ray job submit` recipe on a real two-node cluster (this machine, loopback, token
auth, the job API on the head's loopback): the job succeeds and the Parquet is complete.

The command is read from the README, and docs/cluster.md must give the same line, so the docs
and the test cannot drift: the test replaces only its placeholders (the job API address, the
grid file, the shared storage) and types the rest as written. The nodes run with the environment
first on PATH, as the launcher files start them, so the bare `sweepgrok` of the recipe resolves
(test_cluster_faults covers a head started without it, and a node lost during a job).

Timeout: about 2.5x the duration measured on 2 cores shared with other work.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_exactly_once, write_grid
from ray_cluster import ONE_CLUSTER_AT_A_TIME, RAY, Cluster, two_node_cluster

ROOT = Path(__file__).resolve().parents[2]
JOB_COMMAND = re.compile(r"`(RAY_AUTH_MODE=token ray job submit [^`]+)`")
"""The recipe in the README: one command in backticks."""


def readme_job_command() -> str:
    (command,) = JOB_COMMAND.findall((ROOT / "README.md").read_text())
    return command


def test_docs_cluster_gives_the_readmes_job_command() -> None:
    lines = (ROOT / "docs" / "cluster.md").read_text().splitlines()
    assert readme_job_command() in lines


def as_typed(command: str, cluster: Cluster, grid: Path, storage: Path) -> list[str]:
    """The recipe's words with its placeholders filled in for this cluster."""
    words = shlex.split(command)
    # The cluster's env sets RAY_AUTH_MODE=token, and the token (no ~/.ray/auth_token here).
    assert words[:2] == ["RAY_AUTH_MODE=token", "ray"], words
    assert cluster.env["RAY_AUTH_MODE"] == "token"
    words = [RAY, *words[2:]]
    words[words.index("--address") + 1] = str(cluster.dashboard_url)
    words[words.index("launch") + 1] = str(grid)  # absolute: the test's grid is not in the repo
    words[words.index("--storage") + 1] = str(storage)
    return words


@pytest.mark.slow
@ONE_CLUSTER_AT_A_TIME
@pytest.mark.timeout(600)  # 212 s measured (load ~25)
def test_the_readme_ray_job_recipe_runs_a_grid_on_two_nodes(
    tmp_path: Path, ray_env: dict[str, str]
) -> None:
    grid = write_grid(tmp_path / "grid.yaml", "job", seeds=[1, 2])
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    with two_node_cluster(ray_env, tmp_path, dashboard=True, path=path) as cluster:
        command = as_typed(readme_job_command(), cluster, grid, tmp_path)
        # From the checkout: `--working-dir .` ships this sweepgrok/ to the job.
        job = subprocess.run(
            command, cwd=ROOT, env=cluster.env, capture_output=True, text=True, timeout=480
        )
    out = job.stdout + job.stderr
    assert job.returncode == 0 and "succeeded" in out, out
    runs = assert_exactly_once(tmp_path / "job", 2)
    # Two one-CPU trials on two one-CPU nodes: one ran on each.
    assert runs["node_id"].nunique() == 2, runs[["run_id", "node_id"]]
