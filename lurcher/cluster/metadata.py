"""The cluster as the server shows it: the metadata group, its leader, GetClusterMetadata.

Group ``META_GROUP`` of every node is the metadata replication group. Its primary is the
cluster's Leader: GetClusterMetadata names it (role Leader) and every other node
(Follower), each with its status as this node sees it: itself Healthy, another node Healthy
while this node's link to it is up, else Unreachable. While a view change is under way no
node is Leader, and Iggy's clients stay where they are.

What the group carries: every metadata change (streams, topics, partitions, consumer
groups, users, tokens), as the events the change's handler decided, applied on every node in
commit order (``meta_changes``). A change made on any node is acknowledged once committed on
a quorum, and every node serves reads of it. Partitions (messages, consumer offsets) are
carried by the partition groups (``partitions``, ``partition_groups``); consumer group
membership stays runtime state of the node the consumer is connected to.

Endpoints: this node's are the addresses its listeners really bound; another node's are the
ports its ``[[cluster.node.others]]`` entry gives, else this node's configured ones (Iggy's
rule).
"""

from __future__ import annotations

from typing import Any

from lurcher.cluster.config import ClusterConfig
from lurcher.cluster.host import ClusterNode
from lurcher.cluster.meta_changes import MetaChanges, MetaService, MetaView
from lurcher.cluster.partition_groups import GroupLayout
from lurcher.cluster.partition_service import PartitionService
from lurcher.cluster.partitions import ReplicatedPartitions
from lurcher.cluster.status import META_GROUP
from lurcher.core.wire.responses.cluster import ClusterMetadata, NodeRole, NodeStatus
from lurcher.core.wire.responses.cluster import ClusterNode as NodeInfo
from lurcher.transports.tls import mutual_contexts

TRANSPORTS = ("tcp", "quic", "http", "websocket")


async def start_node(config: ClusterConfig, shard: Any) -> ClusterNode:
    """Start this node's replication groups on ``shard`` (shard 0) and route its metadata
    changes through the metadata group (``meta_changes``). Raises OSError, TlsConfigError
    (``[cluster.tls]``'s files missing or unreadable)."""
    tls = mutual_contexts(config.tls, shard.data_path) if config.tls.enabled else None
    store = shard.meta
    cluster_dir = shard.data_path / "cluster"
    cluster_dir.mkdir(parents=True, exist_ok=True)
    service = MetaService(shard, store, cluster_dir / "meta-applied.json")
    await service.open()
    layout = GroupLayout(len(config.names))
    partition_services = {group: PartitionService(shard, service)
                          for group, members in layout.members().items()
                          if config.index in members}
    for partition_service in partition_services.values():
        service.on_applied.append(partition_service.metadata_applied)
    groups: dict[int, Any] = {META_GROUP: lambda: service}
    groups.update({group: (members, lambda s=partition_services.get(group): s)
                   for group, members in layout.members().items()})
    partition_groups = frozenset(layout.members())
    node = ClusterNode(config, cluster_dir, groups, rebalanced=partition_groups,
                       checkpointed=partition_groups | {META_GROUP},
                       page_cache=frozenset() if shard.enforce_fsync else partition_groups,
                       announced=partition_groups | {META_GROUP}, tls=tls)
    shard.meta = MetaView(store)
    timeout_s = config.commit_timeout_ms / 1000
    MetaChanges(node, META_GROUP, service, timeout_s).install(shard.dispatcher)
    partitions = ReplicatedPartitions(shard, node, layout, partition_services, service,
                                      timeout_s)
    partitions.install(shard.dispatcher)
    _serve_meta_events(partitions.forwarder, service)
    shard.cluster_config, shard.cluster_node = config, node
    await node.start()
    return node


def _serve_meta_events(forwarder: Any, service: MetaService) -> None:
    """Any node answers a peer's ask for the metadata group's events (``MetaService``'s
    fill after a checkpoint), over the node's forwarder."""
    forwarder.handlers["meta_events"] = service.events_for
    forwarder.anywhere = frozenset(forwarder.anywhere) | {"meta_events"}

    async def fetch(body: bytes) -> bytes:
        return await forwarder.on_any_other(META_GROUP, "meta_events", body)
    service.fetch = fetch


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


def describe_shard(shard: Any) -> ClusterMetadata:
    """GetClusterMetadata's answer on ``shard`` (shard 0 of a cluster node)."""
    configured = {t: getattr(shard.config.typed, t).address for t in TRANSPORTS}
    return describe(shard.cluster_config, shard.cluster_node, shard.endpoints, configured)


def _role(leader: int | None, index: int) -> int:
    return NodeRole.LEADER if leader == index else NodeRole.FOLLOWER
