"""The cluster as the server shows it: the metadata group, its leader, GetClusterMetadata.

Group ``META_GROUP`` of every node is the metadata replication group. Its primary is the
cluster's Leader: GetClusterMetadata names it (role Leader) and every other node
(Follower), each with its status as this node sees it: itself Healthy, another node Healthy
while this node's link to it is up, else Unreachable. While a view change is under way no
node is Leader, and Iggy's clients stay where they are.

What the group carries today: nothing but its own operation (``LeadershipService``): it
elects and fails over the leader. Carrying the metadata events through it is the next step of
the cluster work (README "Cluster").

Endpoints: this node's are the addresses its listeners really bound; another node's are the
ports its ``[[cluster.node.others]]`` entry gives, else this node's configured ones (Iggy's
rule).
"""

from __future__ import annotations

from pathlib import Path
from lurcher.cluster.config import ClusterConfig
from lurcher.cluster.host import ClusterNode
from lurcher.core.wire.responses.cluster import ClusterMetadata, NodeRole, NodeStatus
from lurcher.core.wire.responses.cluster import ClusterNode as NodeInfo

META_GROUP = 0
TRANSPORTS = ("tcp", "quic", "http", "websocket")


class LeadershipService:
    """The replicated object of the metadata group until metadata events travel through it."""

    def apply(self, body: bytes) -> bytes:
        return b""

    def snapshot(self) -> bytes:
        return b""

    def restore(self, state: bytes) -> None:
        return None


async def start_node(config: ClusterConfig, data_path: Path) -> ClusterNode:
    """This node's replication groups, listening and dialing. Raises OSError."""
    node = ClusterNode(config, data_path / "cluster", {META_GROUP: LeadershipService})
    await node.start()
    return node


def _port(address: str | None) -> int:
    return int(address.rpartition(":")[2]) if address else 0


def describe(config: ClusterConfig, node: ClusterNode, bound: dict[str, str],
             configured: dict[str, str]) -> ClusterMetadata:
    """GetClusterMetadata's answer. ``bound``: this node's listener addresses by transport;
    ``configured``: the configured addresses (the other nodes' default ports)."""
    leader = node.leader(META_GROUP)
    current = config.node.current
    nodes = [NodeInfo(current.name, current.ip, *(_port(bound.get(t)) for t in TRANSPORTS),
                      _role(leader, node.index), NodeStatus.HEALTHY)]
    for other in config.node.others:
        index = config.names.index(other.name)
        ports = [getattr(other.ports, t) or _port(configured.get(t)) for t in TRANSPORTS]
        status = NodeStatus.HEALTHY if node.link_up(index) else NodeStatus.UNREACHABLE
        nodes.append(NodeInfo(other.name, other.ip, *ports, _role(leader, index), status))
    return ClusterMetadata(config.name, nodes)


def _role(leader: int | None, index: int) -> int:
    return NodeRole.LEADER if leader == index else NodeRole.FOLLOWER
