"""A two-node Ray cluster on this machine for tests (token auth, loopback only), and node loss.

Every process is started by the test (`ray start --block`, so each node's daemons are children
of a process we own) and stopped by PID; node loss kills the worker's raylet and its
descendants by PID. Never `ray stop`, never a name match: other clusters here are not ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import TAG_ENV, stop_pids, tagged_pids, wait_until

from sweepgrok.tune.callback import TUNE_DIR

RAY = str(Path(sys.executable).parent / "ray")

ONE_CLUSTER_AT_A_TIME = pytest.mark.xdist_group("two-node-cluster")
"""On the tests that start a two-node cluster: `make test` runs tests side by side on 4 xdist
workers (--dist loadgroup), and these run one after another on one of them. Each cluster is
two raylets, a GCS and sometimes a dashboard on the 2 cores, and node-loss detection counts on
heartbeats that a node starved by a second cluster could miss."""


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on loopback (the kernel's ephemeral range: clear of Ray's
    worker port range 10002-19999)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for_port(port: int, timeout: float = 60) -> None:
    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, timeout, f"a server on port {port}")


_COUNT_NODES = """
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)
deadline = time.time() + float(sys.argv[3])
while time.time() < deadline and sum(n["Alive"] for n in ray.nodes()) < int(sys.argv[2]):
    time.sleep(0.5)
print(sum(n["Alive"] for n in ray.nodes()))
"""


def wait_for_nodes(address: str, n: int, env: dict[str, str], timeout: float = 90) -> None:
    """Block until the cluster at `address` has n alive nodes (fails otherwise)."""
    # A separate process: the test process may have run embedded Ray sessions (global state).
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_NODES, address, str(n), str(timeout)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout + 60,
    )
    assert out.stdout.strip() == str(n), out.stdout + out.stderr


@dataclass
class Cluster:
    """A running two-node cluster: `env` is what every driver and client needs (the token)."""

    address: str
    env: dict[str, str]
    head: subprocess.Popen
    worker: subprocess.Popen
    dashboard_url: str | None = None
    started: list[subprocess.Popen] = field(default_factory=list)


def children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc: no external tool)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry.name))
    return kids


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, children first."""
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def raylet_of(start_proc: subprocess.Popen) -> int:
    """The raylet of the node that `ray start --block` process started (its child)."""
    raylets = [p for p in children(start_proc.pid) if "/raylet " in cmdline(p)]
    assert len(raylets) == 1, [cmdline(p) for p in children(start_proc.pid)]
    return raylets[0]


def kill_node(start_proc: subprocess.Popen) -> list[int]:
    """Node loss: SIGKILL the node's raylet and everything below it (trial workers, agents)."""
    raylet = raylet_of(start_proc)
    doomed = [raylet, *descendants(raylet)]  # listed first: killed children get re-parented
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return doomed


@contextlib.contextmanager
def two_node_cluster(
    ray_env: dict[str, str], logs: Path, dashboard: bool = False, path: str | None = None
) -> Iterator[Cluster]:
    """Head and worker, one CPU each, token auth, everything on loopback; stopped by PID.

    `dashboard` serves the job API on loopback (for `ray job submit`); `path` is the PATH the
    nodes (and so a job's entrypoint) run with."""
    env = {**ray_env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    node_env = {**env, "PATH": path} if path is not None else env
    gcs, client, agent_head, agent_worker, dash = free_ports(5)
    address = f"127.0.0.1:{gcs}"
    common = [
        "--block",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--disable-usage-stats",
        f"--temp-dir={ray_env['RAY_TMPDIR']}",
    ]
    # Each head serves its own ports: a second Ray on this machine must not collide with ours.
    web = (
        ["--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}"]
        if dashboard
        else ["--include-dashboard=false"]
    )
    head_cmd = [RAY, "start", "--head", f"--port={gcs}", f"--ray-client-server-port={client}"]
    started = [
        subprocess.Popen(
            [*head_cmd, f"--dashboard-agent-listen-port={agent_head}", *web, *common],
            env=node_env,
            stdout=(logs / "head.log").open("w"),
            stderr=subprocess.STDOUT,
        )
    ]
    try:
        wait_for_port(gcs)
        started.append(
            subprocess.Popen(
                [
                    RAY,
                    "start",
                    f"--address={address}",
                    f"--dashboard-agent-listen-port={agent_worker}",
                    *common,
                ],
                env=node_env,
                stdout=(logs / "worker.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_for_nodes(address, 2, env)
        if dashboard:
            wait_for_port(dash)
        url = f"http://127.0.0.1:{dash}" if dashboard else None
        yield Cluster(address, env, started[0], started[1], url, started)
    finally:
        stop_pids([p.pid for p in started] + tagged_pids(ray_env[TAG_ENV]))


# ---- Tune's view of a trial (its latest experiment snapshot) ----


def snapshot_of(sweep_dir: Path, trial_id: str) -> dict[str, Any]:
    """The trial's runtime record in Tune's latest experiment snapshot ({} if not there yet):
    num_failures, last_result (with the trial's latest reported step), ..."""
    files = sorted((sweep_dir / TUNE_DIR).glob("experiment_state-*.json"))
    try:
        trial_data = json.loads(files[-1].read_text())["trial_data"]
    except (IndexError, OSError, ValueError):  # not written yet, or being written
        return {}
    for state, runtime in trial_data:
        if json.loads(state)["trial_id"] == trial_id:
            return dict(json.loads(runtime))
    return {}


def failures(sweep_dir: Path, trial_id: str) -> int:
    """How often Tune's latest snapshot says the trial failed (0 if not known yet)."""
    return int(snapshot_of(sweep_dir, trial_id).get("num_failures", 0))
