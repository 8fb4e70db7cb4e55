"""Can the Ray cluster run a trial at all? Checked once Ray is up, before any trial starts.

Ray would otherwise keep a trial that no node can hold pending forever (Tune only warns, once a
minute). A trial runs on one node, so what counts is the largest node: the alive nodes, and the
node types an autoscaler may still add (read from the cluster's autoscaler config, when it has
one: a cluster that adds GPU nodes on demand may have none yet).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sweepgrok.config.grid_file import Resources
from sweepgrok.config.trial import ConfigError

log = logging.getLogger(__name__)


class ClusterTooSmall(ConfigError):
    """No node of the cluster can hold one trial's resources (a user error: exit code 2)."""


@dataclass(frozen=True)
class Node:
    """What one node has (or one node type of the autoscaler would have)."""

    cpu: float
    gpu: float


def alive_nodes() -> list[Node]:
    """The alive nodes of the connected cluster."""
    import ray

    return [
        Node(float(n["Resources"].get("CPU", 0)), float(n["Resources"].get("GPU", 0)))
        for n in ray.nodes()
        if n.get("Alive")
    ]


def autoscaler_nodes() -> list[Node]:
    """The node types the cluster's autoscaler may launch; [] without an autoscaler.

    Ray has no public call for it; its private one (what Ray Train uses) is read defensively:
    if it moves, the check falls back to the alive nodes."""
    try:
        from ray._private.state import state

        config = state.get_cluster_config()
        groups = list(config.node_group_configs) if config is not None else []
        return [
            Node(float(g.resources.get("CPU", 0)), float(g.resources.get("GPU", 0)))
            for g in groups
            if g.max_count != 0
        ]
    except Exception:  # a private API: any failure means "no autoscaler info"
        return []


def _count(n: float) -> str:
    return f"{n:g} GPU" + ("" if n == 1 else "s")


def capacity_problem(resources: Resources, nodes: Sequence[Node], source: str | Path) -> str | None:
    """Why no node in `nodes` can hold one trial asking for `resources`, else None."""
    if any(n.cpu >= resources.cpu and n.gpu >= resources.gpu for n in nodes):
        return None
    total = sum(n.gpu for n in nodes)
    most_gpu = max((n.gpu for n in nodes), default=0.0)
    most_cpu = max((n.cpu for n in nodes), default=0.0)
    ask = f"{source}: resources.gpu: {resources.gpu:g} per trial, but"
    if resources.gpu > 0 and total == 0:
        return (
            f"{ask} the Ray cluster has no GPU: set resources.gpu: 0 with train.device: auto "
            "(trials train on the CPU), or launch on a cluster with GPUs (--address)"
        )
    if resources.gpu > most_gpu:
        return (
            f"{ask} the Ray cluster has {_count(total)}, at most {_count(most_gpu)} on one node "
            f"(a trial runs on one node): ask for at most {most_gpu:g}, or pack more seeds into "
            "a trial (seeds_per_trial) instead"
        )
    if resources.cpu > most_cpu:
        return (
            f"{source}: resources.cpu: {resources.cpu:g} per trial, but no node of the Ray "
            f"cluster has more than {most_cpu:g} CPUs (a trial runs on one node): ask for at "
            f"most {most_cpu:g}"
        )
    return (
        f"{source}: resources: {{cpu: {resources.cpu:g}, gpu: {resources.gpu:g}}} per trial, "
        "but no node of the Ray cluster has both: ask for fewer CPUs per trial"
    )


def check_cluster(resources: Resources, source: str | Path) -> None:
    """Raise ClusterTooSmall if no node of the connected cluster can hold one trial; warn when
    the cluster has GPUs that the trials, asking for none, will not use."""
    alive = alive_nodes()
    problem = capacity_problem(resources, [*alive, *autoscaler_nodes()], source)
    if problem:
        raise ClusterTooSmall(problem)
    gpus = sum(n.gpu for n in alive)
    if resources.gpu == 0 and gpus > 0:
        log.warning(
            "%s: the Ray cluster has %s, but resources.gpu is 0: the trials train on the CPU "
            "(set resources: {gpu: 1} to train on them)",
            source,
            _count(gpus),
        )
