"""What a node knows of the cluster, for operators: ``cluster_status`` (the JSON of the HTTP
route ``GET /cluster/status``, read by ``lurcher cluster status`` and the MCP tool), the
per-replica lag and the commit-time tally the metrics expose.

Lag is in ops behind the primary's commit number, "where known": the primary knows every
backup's (its commit minus the highest op that backup acknowledged in the current view; a
backup that has acknowledged nothing in this view is unknown); a backup knows only its own
(the highest commit a primary announced minus its own commit). Everything here is read from
the node's state at the time of the call; nothing is kept beyond ``LatencyTally``'s counts.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from lurcher.core.replication.replica import Replica, Status
from lurcher.core.wire.responses.cluster import NodeRole, NodeStatus

COMMIT_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0)
META_GROUP = 0  # the metadata replication group; its primary is the cluster's Leader
GROUP_NAMES = {META_GROUP: "metadata"}


class LatencyTally:
    """Counts of durations per bucket (upper bounds ``buckets``, by default
    ``COMMIT_BUCKETS_S``; last count: above them), their sum and number: a histogram without
    a metrics library, a few hundred nanoseconds an observation."""

    def __init__(self, buckets: tuple[float, ...] = COMMIT_BUCKETS_S) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total_s = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, seconds)] += 1
        self.total_s += seconds
        self.count += 1

    def add(self, other: LatencyTally) -> None:
        """Fold ``other`` (same buckets) into this one."""
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.total_s += other.total_s
        self.count += other.count

    def timer(self, clock: Callable[[], float]) -> Callable[[Any], None]:
        """A done-callback for a future started now: observes its time if it succeeded."""
        start = clock()

        def done(future: Any) -> None:
            if not future.cancelled() and future.exception() is None:
                self.observe(clock() - start)
        return done


def replica_lags(replica: Replica, primary_commit: int) -> list[int | None]:
    """Ops behind the primary's commit, per replica index (None: not known here)."""
    lags: list[int | None] = [None] * replica.n
    if replica.status is not Status.NORMAL:
        return lags
    if replica.is_primary:
        for index, acked in replica.acked.items():
            lags[index] = max(0, replica.commit - acked)
        lags[replica.index] = 0
    else:
        lags[replica.index] = max(0, primary_commit - replica.commit)
    return lags


def group_status(node: Any, group: int) -> dict[str, Any]:
    """One replication group as ``node`` (a ``ClusterNode``) sees it."""
    g = node.groups[group]
    r, names = g.replica, [node.config.names[m] for m in g.members]
    normal = r.status is Status.NORMAL
    lags = replica_lags(r, g.primary_commit)
    return {"group": group, "name": GROUP_NAMES.get(group, f"group-{group}"),
            "status": r.status.value, "view": r.view,
            "primary": names[r.primary_of(r.view)] if normal else None,
            "op": r.op, "commit": r.commit, "view_changes": g.view_changes,
            "replicas": [{"node": names[i], "lag_ops": lag} for i, lag in enumerate(lags)]}


def cluster_status(shard: Any) -> dict[str, Any]:
    """The whole answer: ``{"enabled": false}`` on a single node, else the cluster's name,
    this node, the nodes (as GetClusterMetadata names them) and every group's status."""
    node = shard.cluster_node
    if node is None:
        return {"enabled": False}
    from lurcher.cluster.metadata import describe_shard  # it imports the host, which us
    meta = describe_shard(shard)
    nodes = [{"name": n.name, "ip": n.ip, "tcp_port": n.tcp_port, "http_port": n.http_port,
              "role": NodeRole(n.role).name.lower(), "status": NodeStatus(n.status).name.lower()}
             for n in meta.nodes]
    return {"enabled": True, "cluster": meta.name, "node": node.config.node.current.name,
            "nodes": nodes, "groups": [group_status(node, g) for g in sorted(node.groups)]}
