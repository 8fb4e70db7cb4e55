"""The Ray cluster launcher files start authenticated clusters with a private dashboard."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["cluster.yaml", "cluster-aws.yaml"])
def test_every_node_starts_with_token_auth_and_a_loopback_dashboard(name: str) -> None:
    doc = yaml.safe_load((ROOT / name).read_text())
    starts = [
        cmd
        for key in ("head_start_ray_commands", "worker_start_ray_commands")
        for cmd in doc[key]
        if "ray start" in cmd
    ]
    assert len(starts) == 2
    for cmd in starts:
        assert "RAY_AUTH_MODE=token" in cmd, cmd
        assert "0.0.0.0" not in cmd
    head = next(c for c in doc["head_start_ray_commands"] if "--head" in c)
    assert "--dashboard-host=127.0.0.1" in head
    # The token travels from the user's machine, once, and each node refuses to start without.
    assert doc["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        assert doc[key][0].startswith("chmod 600 ~/.ray/auth_token && test -s")


def project_files() -> list[str]:
    """The files git tracks, or (outside a git checkout) every file but the venv's."""
    done = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode == 0:
        return done.stdout.split()
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in (".venv", ".git")]  # prune in place: not walked
        files += [str(Path(folder, n).relative_to(ROOT)) for n in names]
    return files


def test_no_token_is_committed() -> None:
    files = project_files()
    assert files and not [f for f in files if "auth_token" in Path(f).name]
