"""``ShardFace``: the part of ``Shard`` that command handlers and placement may use.

``Shard`` carries everything a shard process needs (front ends, the bus, migration, I/O);
handlers see only this face, so what a handler can reach is written down here, and a test
can drive handlers with any object that has these members (``tests/unit/shard``).
Invariant: a handler touches the shard only through the members listed here; adding a use
means adding it here first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

if TYPE_CHECKING:
    from lurcher.auth.passwords import Passwords
    from lurcher.auth.session import Session
    from lurcher.auth.throttle import LoginThrottle
    from lurcher.runtime.config import Config
    from lurcher.core.log.config import LogConfig
    from lurcher.core.log.partition import Partition
    from lurcher.core.meta.state import TopicMeta
    from lurcher.core.meta.store import MetaReplica, MetaStore
    from lurcher.core.shard.dedup import Deduplication
    from lurcher.core.shard.groups import Groups
    from lurcher.core.shard.shard import Limits


class ShardFace(Protocol):
    # configuration and clock
    config: Config
    clock: Callable[[], int]
    data_path: Path
    limits: Limits
    log_config: LogConfig
    started_at_us: int
    endpoints: dict[str, str]
    # an enabled [cluster] (shard 0 only): the ClusterNode and its typed section, else None
    cluster_node: Any
    cluster_config: Any
    peer_stats: Any  # with cluster_node: counters of partitions other nodes hold, else None
    # the shards' bus and router when several shards run (``forward`` to another shard), else None
    cluster: Any
    # metadata (read ``meta.state``; change it with ``meta.record``) and group membership
    meta: MetaStore | MetaReplica
    groups: Groups
    # authentication
    passwords: Passwords
    login_throttle: LoginThrottle
    # messages
    dedup: Deduplication
    balanced_counters: dict[tuple[int, int], int]
    partitions: dict[tuple[int, int, int], Partition]
    # clients of this shard
    sessions: dict[int, Session]
    connections: dict[int, Any]

    def partition(self, topic: TopicMeta, partition_id: int) -> Partition:
        """This shard's partition of ``topic``. Raises IggyError PARTITION_NOT_FOUND."""

    def topic_partitions(self, topic: TopicMeta) -> list[Partition]:
        """This shard's partitions of ``topic``."""

    def all_partition_stats(self) -> list[Any]:
        """Counters of every partition, on every shard."""

    def all_sessions(self) -> list[Any]:
        """Sessions of every shard."""

    def leave_groups(self, client_id: int) -> None:
        """Remove the client from every consumer group (on every shard)."""

    def purge_local(self, stream_id: int, topic_id: int | None) -> Awaitable[None] | None:
        """Purge this shard's partitions of a stream or of one topic: what to await before
        answering (it raises IggyError), None when there is nothing to purge here."""

    def partition_purged(self, stream_id: int, topic_id: int, partition_id: int) -> None:
        """Tell the consumer groups that a partition was purged (here or by its group)."""

    def append(self, partition: Partition, batch: Any) -> Any:
        """Append ``batch``: the result, or an awaitable of it when the write completes later."""
