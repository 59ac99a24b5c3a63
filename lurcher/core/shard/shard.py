"""The shard: owns the partitions it serves, the sessions of its connections and the
metadata copy it reads; executes commands through its ``Dispatcher``.

With one shard (this issue) the shard also owns the metadata store. Partition files live
under ``<system.path>/streams/<stream>/topics/<topic>/partitions/<partition>``. Only the
shard that owns a partition touches its files.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lurcher.auth.passwords import Passwords
from lurcher.auth.permissions import authorize
from lurcher.auth.session import Session
from lurcher.config import Config
from lurcher.core.log.config import LogConfig
from lurcher.core.log.io import select_io
from lurcher.core.log.partition import Partition
from lurcher.core.meta.state import TopicMeta
from lurcher.core.meta.store import MetaStore
from lurcher.core.shard.dedup import Deduplication
from lurcher.core.shard.dispatch import Dispatcher
from lurcher.core.shard.groups import Groups
from lurcher.core.shard.lifecycle import PartitionLifecycle
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

Key = tuple[int, int, int]


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Limits:
    max_control_payload_bytes: int
    max_send_payload_bytes: int


def owner_of(stream_id: int, topic_id: int, partition_id: int, shards_count: int) -> int:
    """The shard that owns a partition: a stable hash of its ids (same in every process)."""
    key = (stream_id * 0x9E3779B1 + topic_id * 0x85EBCA77 + partition_id * 0xC2B2AE3D)
    return (key ^ (key >> 15)) % shards_count if shards_count > 1 else 0


class Shard:
    def __init__(self, config: Config, clock: Callable[[], int] = now_us,
                 shard_id: int = 0, shards_count: int = 1) -> None:
        self.config = config
        self.shard_id = shard_id
        self.shards_count = shards_count
        self.clock = clock
        self.data_path = Path(config["system.path"]).resolve()
        self.limits = Limits(config["limits.max_control_payload_bytes"],
                             config["limits.max_send_payload_bytes"])
        self.meta = MetaStore(self.data_path / "state" / "log",
                              enforce_fsync=config["system.state.enforce_fsync"])
        self.log_config = LogConfig(
            segment_size_bytes=config.size("system.segment.size"),
            enforce_fsync=config["system.partition.enforce_fsync"],
        )
        self.io = select_io(config.get("system.io", "auto"))
        self.passwords = Passwords.from_config(config)
        self.partitions: dict[Key, Partition] = {}
        self.sessions: dict[int, Session] = {}
        self.connections: dict[int, Any] = {}
        self.balanced_counters: dict[tuple[int, int], int] = {}
        self.groups = Groups()
        self.dedup = Deduplication.from_config(config)
        self.started_at_us = clock()
        self.endpoints: dict[str, str] = {}
        self.dispatcher = Dispatcher(self)
        self._open_all_partitions()
        self.meta.state.observers.append(PartitionLifecycle(self))

    # -- partitions ---------------------------------------------------------------
    @property
    def is_metadata_owner(self) -> bool:
        return self.shard_id == 0

    def owns(self, stream_id: int, topic_id: int, partition_id: int) -> bool:
        return owner_of(stream_id, topic_id, partition_id, self.shards_count) == self.shard_id

    def partition_path(self, stream_id: int, topic_id: int, partition_id: int) -> Path:
        return (self.data_path / "streams" / str(stream_id) / "topics" / str(topic_id)
                / "partitions" / str(partition_id))

    def topic_path(self, stream_id: int, topic_id: int) -> Path:
        return self.data_path / "streams" / str(stream_id) / "topics" / str(topic_id)

    def open_partition(self, topic: TopicMeta, partition_id: int) -> Partition:
        key = (topic.stream_id, topic.id, partition_id)
        partition = Partition.open(str(self.partition_path(*key)), partition_id,
                                   self.log_config, io=self.io, clock=self.clock,
                                   created_at_us=topic.partition_created_at[partition_id])
        self.partitions[key] = partition
        return partition

    def _open_all_partitions(self) -> None:
        for topic in self.meta.state.topics():
            for pid in range(topic.partitions_count):
                if self.owns(topic.stream_id, topic.id, pid):
                    self.open_partition(topic, pid)
        if self.partitions:
            log.info("opened %d partition(s)", len(self.partitions))

    def partition(self, topic: TopicMeta, partition_id: int) -> Partition:
        """The partition, or IggyError PARTITION_NOT_FOUND."""
        found = self.partitions.get((topic.stream_id, topic.id, partition_id))
        if found is None:
            raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                            f"partition {partition_id} of topic {topic.id}")
        return found

    def topic_partitions(self, topic: TopicMeta) -> list[Partition]:
        return [self.partitions[(topic.stream_id, topic.id, pid)]
                for pid in range(topic.partitions_count)]

    def drop_partition(self, stream_id: int, topic_id: int, partition_id: int) -> None:
        """Close a partition and delete its files."""
        partition = self.partitions.pop((stream_id, topic_id, partition_id), None)
        self.dedup.drop((stream_id, topic_id, partition_id))
        if partition is not None:
            partition.close()
        shutil.rmtree(self.partition_path(stream_id, topic_id, partition_id), ignore_errors=True)

    def append(self, partition: Partition, batch: Any) -> None:
        """Store a validated batch (the single place sends reach the log)."""
        partition.append(batch)

    # -- sessions -----------------------------------------------------------------
    def open_session(self, address: str, transport: int, connection: Any = None) -> Session:
        session = Session(address, transport, last_seen_us=self.clock())
        self.sessions[session.client_id] = session
        if connection is not None:
            self.connections[session.client_id] = connection
        return session

    def close_session(self, session: Session) -> None:
        session.closed = True
        self.groups.drop_client(session.client_id, self._topic_by_ids)
        self.sessions.pop(session.client_id, None)
        self.connections.pop(session.client_id, None)

    def _topic_by_ids(self, stream_id: int, topic_id: int) -> TopicMeta | None:
        stream = self.meta.state.streams.get(stream_id)
        return stream.topics.get(topic_id) if stream else None

    def authorize(self, session: Session, permission: str, request: Any) -> None:
        authorize(self.meta.state, session, permission, request)

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        for connection in list(self.connections.values()):
            connection.disconnect()
        for partition in self.partitions.values():
            partition.close()
        self.partitions.clear()
        self.meta.close()
