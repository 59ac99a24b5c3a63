"""The shard: owns the partitions it serves, the sessions of its connections and the
metadata copy it reads; executes commands through its ``Dispatcher``.

With one shard (this issue) the shard also owns the metadata store. Partition files live
under ``<system.path>/streams/<stream>/topics/<topic>/partitions/<partition>``. Only the
shard that owns a partition touches its files.

Invariant once partitions are opened (at start and after a catch-up): an owned partition
holds no stored offset of a consumer group the metadata does not have, so a group id re-used
after a deletion this shard missed starts from nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from lurcher.auth.passwords import Passwords
from lurcher.auth.permissions import authorize
from lurcher.auth.session import Session
from lurcher.auth.throttle import BackoffConfig, LoginThrottle
from lurcher.runtime import settings
from lurcher.runtime.config import Config
from lurcher.core.log.config import LogConfig
from lurcher.core.log.files import DescriptorCache
from lurcher.core.log.io import select_io
from lurcher.core.log.offsets import ConsumerOffsets
from lurcher.core.log.partition import Partition, purge_each
from lurcher.core.meta.state import TopicMeta
from lurcher.core.meta.store import MetaStore
from lurcher.core.shard.dedup import Deduplication
from lurcher.core.shard.commit import GroupCommit
from lurcher.core.shard import audit
from lurcher.core.shard.dispatch import Dispatcher
from lurcher.core.shard.groups import GroupRuntime, Groups, Member
from lurcher.core.shard.peers import PartitionStats
from lurcher.core.shard.lifecycle import PartitionLifecycle
from lurcher.core.shard.partition_files import open_later
from lurcher.core.shard.handlers.users import end_stale_sessions
from lurcher.core.shard.tombstones import Graveyard, entity_path
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.frames import FrameLimits
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.validation import stored_problems

log = logging.getLogger(__name__)

Key = tuple[int, int, int]


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Limits:
    """The ``[limits]`` section: request frame sizes (``frames``) and poll reply bytes."""

    frames: FrameLimits
    max_poll_reply_bytes: int

    @classmethod
    def from_config(cls, limits: settings.Limits) -> Limits:
        return cls(FrameLimits(limits.max_control_payload_bytes, limits.max_send_payload_bytes,
                               limits.max_unauthenticated_payload_bytes),
                   limits.max_poll_reply_bytes)


def owner_of(stream_id: int, topic_id: int, partition_id: int, shards_count: int) -> int:
    """The shard that owns a partition, the same in every process and across restarts.

    The sum of the ids spreads the usual layouts evenly: consecutive partitions of one
    topic, one topic per stream, one stream per producer all land on consecutive shards.
    """
    return (stream_id + topic_id + partition_id) % shards_count


def warn_stored_problems(state: Any) -> None:
    """Log metadata stored by an older version that breaks the field rules (it loads, and
    lists show it cut or as the server default, see ``core.shard.views``)."""
    for problem in stored_problems(state):
        log.warning("stored metadata out of range, shown cut or as the default until it is "
                    "updated: %s", problem)


class Shard:
    def __init__(self, config: Config, clock: Callable[[], int] = now_us,
                 shard_id: int = 0, shards_count: int = 1, meta: Any = None) -> None:
        """``meta``: a ``MetaReplica`` for shards that do not own the metadata; by default
        the shard opens the metadata store itself."""
        self.config = config
        self.shard_id = shard_id
        self.shards_count = shards_count
        # on a cluster node shard 0 owns every partition: it runs the replication groups
        self.partition_shards = 1 if config.typed.cluster.enabled else shards_count
        self.clock = clock
        system = config.typed.system
        self.data_path = Path(system.path).resolve()
        self.limits = Limits.from_config(config.typed.limits)
        self.io = select_io(system.io, system.segment.direct_io)
        self.meta = meta or MetaStore(self.data_path / "state" / "log",
                                      enforce_fsync=system.state.enforce_fsync, io=self.io)
        self.enforce_fsync = system.partition.enforce_fsync
        self.log_config = LogConfig(
            segment_size_bytes=system.segment.size,
            enforce_fsync=self.enforce_fsync, group_commit=True,
            max_inflight_batches=system.partition.max_inflight_batches,
            inline_write_max_bytes=system.partition.inline_write_max_bytes,
            page_cache_window=system.segment.page_cache_window,
            reserve_ahead=system.segment.reserve_ahead,
            cap_stored_offsets=not config.typed.cluster.enabled,
        )
        self.group_commit = GroupCommit()
        self.files = DescriptorCache(self.io, system.segment.max_open_files)
        self.passwords = Passwords.from_config(config)
        self.login_throttle = LoginThrottle(BackoffConfig.from_config(config.typed.auth))
        self.partitions: dict[Key, Partition] = {}
        self.sessions: dict[int, Session] = {}
        self.connections: dict[int, Any] = {}
        self.balanced_counters: dict[tuple[int, int], int] = {}
        self.groups = Groups(cooperative=shards_count == 1)
        self.dedup = Deduplication.from_config(system.message_deduplication)
        self.started_at_us = clock()
        self.endpoints: dict[str, str] = {}
        self.cluster: Any = None  # a Cluster when several shards run
        # shard 0 of a node of an enabled [cluster]: its ClusterNode and typed section
        self.cluster_node: Any = None
        self.cluster_config: Any = None
        # shard 0 of a cluster node: counters of partitions only other nodes hold (a
        # ``cluster.peer_stats.PeerStats``, refreshed before the commands that show them)
        self.peer_stats: Any = None
        # builds the protocol for a migrated connection: (session, pending bytes) -> protocol
        self.connection_factory: Callable[[Session, bytes], Any] | None = None
        # the binary listeners' ConnectionCap (transports.admission), set by the server;
        # migrated connections count in it too
        self.connection_cap: Any = None
        self.closing = False
        self.dispatcher = Dispatcher(self)
        self.graveyard = Graveyard(self.data_path)
        if not self.meta.is_replica:
            self.graveyard.settle(self.meta.event_at)
            self.graveyard.sweep(self.meta.state)
        if self.is_metadata_owner:
            warn_stored_problems(self.meta.state)
        self._open_all_partitions()
        self.meta.state.observers.append(PartitionLifecycle(self))
        if shard_id == 0:
            self.meta.state.observers.append(audit.MetadataAudit(self))

    # -- partitions ---------------------------------------------------------------
    @property
    def is_metadata_owner(self) -> bool:
        return self.shard_id == 0

    def owns(self, stream_id: int, topic_id: int, partition_id: int) -> bool:
        return owner_of(stream_id, topic_id, partition_id, self.partition_shards) == self.shard_id

    def owner(self, stream_id: int, topic_id: int, partition_id: int) -> int:
        return owner_of(stream_id, topic_id, partition_id, self.partition_shards)

    def partition_path(self, stream_id: int, topic_id: int, partition_id: int) -> Path:
        return entity_path(self.data_path, stream_id, topic_id, partition_id)

    def open_partition(self, topic: TopicMeta, partition_id: int) -> Partition:
        """Open (or create) an owned partition's directory. Raises OSError.

        A partition created before this process started whose directory is missing is
        logged: it is created empty, and any messages it held are gone (``streams/`` moved
        away, or a volume not mounted), unless a crash came right after its creation.
        Something else at its path (a file) is not missing: the open refuses it (the start's
        one-line refusal says why)."""
        key = (topic.stream_id, topic.id, partition_id)
        path = self.partition_path(*key)
        created_at = topic.partition_created_at[partition_id]
        if created_at < self.started_at_us and not os.path.lexists(path):
            log.warning("partition directory %s is missing: it starts empty at offset 0 (was "
                        "%s moved, or its volume not mounted?)", path,
                        self.data_path / "streams")
        partition = Partition.open(str(path), partition_id,
                                   self.log_config, clock=self.clock,
                                   created_at_us=created_at,
                                   files=self.files)
        self.partitions[key] = partition
        return partition

    def _open_all_partitions(self) -> None:
        for topic in self.meta.state.topics():
            for pid in range(topic.partitions_count):
                key = (topic.stream_id, topic.id, pid)
                if self.owns(*key) and key not in self.partitions:
                    self.open_partition(topic, pid)
        if self.partitions:
            log.info("opened %d partition(s)", len(self.partitions))
        self._drop_deleted_groups_offsets()

    def _drop_deleted_groups_offsets(self) -> None:
        """Delete stored offsets of consumer groups the metadata no longer has: a group
        deletion this shard did not see happen (a crash after the event was recorded, or a
        shard down or catching up meanwhile). Otherwise a group created later under the
        re-used id would start from the deleted group's offset, and the stale offset would
        hold back retention."""
        for (stream_id, topic_id, _), partition in self.partitions.items():
            topic = self._topic_by_ids(stream_id, topic_id)
            groups = topic.groups if topic is not None else {}
            for group_id in list(partition.offsets.items("groups")):
                if group_id not in groups:
                    log.info("dropping the offset of deleted consumer group %d on %d/%d/%d",
                             group_id, stream_id, topic_id, partition.partition_id)
                    partition.forget_offset("groups", group_id)

    def partition(self, topic: TopicMeta, partition_id: int) -> Partition:
        """The partition, or IggyError PARTITION_NOT_FOUND."""
        found = self.partitions.get((topic.stream_id, topic.id, partition_id))
        if found is None:
            found = open_later(self, topic, partition_id)
        if found is None:
            raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                            f"partition {partition_id} of topic {topic.id}")
        return found

    def topic_partitions(self, topic: TopicMeta) -> list[Partition]:
        """The partitions of ``topic`` this shard owns."""
        keys = ((topic.stream_id, topic.id, pid) for pid in range(topic.partitions_count))
        return [self.partitions[key] for key in keys if key in self.partitions]

    def partition_views(self, topic: TopicMeta) -> list[Any]:
        """Counters of every partition of ``topic``: live for owned ones, as last gathered
        from the other shards otherwise (zeros for one never reported); on a cluster node,
        of the partitions other nodes hold, as they reported them (``peer_stats``)."""
        views = []
        for pid in range(topic.partitions_count):
            key = (topic.stream_id, topic.id, pid)
            found = None
            if self.peer_stats is not None:  # held by other nodes: this copy stays empty
                found = self.peer_stats.get(key, topic.partition_created_at[pid])
            if found is None:
                found = self.partitions.get(key)
            if found is None and self.cluster is not None:
                found = self.cluster.remote_partitions.get(key)
            views.append(found or PartitionStats(*key, topic.partition_created_at[pid], 0, 0, 0, 0))
        return views

    def all_partition_stats(self) -> list[Any]:
        remote = list(self.cluster.remote_partitions.values()) if self.cluster else []
        return list(self.partition_counters().values()) + remote

    def partition_counters(self) -> dict[Key, Any]:
        """This shard's partitions, those other cluster nodes hold with their counters."""
        if self.peer_stats is None:
            return self.partitions
        return {**self.partitions, **self.peer_stats.rows()}

    def all_sessions(self) -> list[Any]:
        remote = list(self.cluster.remote_sessions) if self.cluster else []
        return list(self.sessions.values()) + remote

    def purge_local(self, stream_id: int, topic_id: int | None) -> Awaitable[None] | None:
        """Purge the owned partitions of a stream (every topic) or of one topic, and tell
        the consumer groups of each one purged; what to await before answering
        (``purge_each``, which raises IggyError). Nothing on a cluster node: its partitions
        are purged through their replication groups."""
        if self.config.typed.cluster.enabled:
            return None
        keys = {partition: key for key, partition in self.partitions.items()
                if key[0] == stream_id and (topic_id is None or key[1] == topic_id)}
        return purge_each(list(keys),
                          then=lambda partition: self.partition_purged(*keys[partition]))

    def partition_purged(self, stream_id: int, topic_id: int, partition_id: int) -> None:
        """A partition was purged (here, or by its replication group): its consumer groups
        forget what they delivered from it and complete its hand-over (``Groups.purged``)."""
        topic = self._topic_by_ids(stream_id, topic_id)
        if topic is not None:
            self.groups.purged(topic, partition_id)

    def catch_up(self, bodies: list[bytes]) -> None:
        """Apply replicated history like a replay (no observers), close what it deleted,
        then open what we own."""
        observers, self.meta.state.observers = self.meta.state.observers, []
        try:
            self.meta.apply_encoded(bodies)
        finally:
            self.meta.state.observers = observers
        self._close_stale_partitions()
        self._open_all_partitions()
        end_stale_sessions(self)  # the history may have ended logins (no observers ran)

    def _close_stale_partitions(self) -> None:
        """Close open partitions the metadata no longer has, or has again under a re-used id
        (another creation time): deletions this shard missed while the metadata owner was
        down. Their directories are the owner's to remove (``tombstones``)."""
        for key, partition in list(self.partitions.items()):
            topic = self._topic_by_ids(key[0], key[1])
            if topic is None or key[2] >= topic.partitions_count \
                    or topic.partition_created_at[key[2]] != partition.created_at:
                log.info("closing partition %s: deleted while this shard was catching up", key)
                del self.partitions[key]
                self.dedup.drop(key)
                partition.close(deleted=True)

    def drop_partition(self, stream_id: int, topic_id: int, partition_id: int) -> None:
        """Close a partition and delete its files."""
        partition = self.partitions.pop((stream_id, topic_id, partition_id), None)
        self.dedup.drop((stream_id, topic_id, partition_id))
        if partition is not None:
            partition.close(deleted=True)
        shutil.rmtree(self.partition_path(stream_id, topic_id, partition_id), ignore_errors=True)

    def append(self, partition: Partition, batch: Any) -> Any:
        """Store a validated batch (the single place sends reach the log): an awaitable that
        completes once it is written, with ``enforce_fsync`` once it is also fsynced, or
        None when a small batch was written inline at once (``core.log.inline``); with
        ``enforce_fsync`` always an awaitable, which also waits for the fsync. The event loop
        does not wait for the disk meanwhile, only for such a small page-cache copy."""
        written = partition.append_async(batch)
        if not self.enforce_fsync:
            return written
        if written is None:
            return self.group_commit.durable(partition)
        durable = asyncio.get_running_loop().create_future()
        written.add_done_callback(lambda done: self._sync_written(partition, done, durable))
        return durable

    def _sync_written(self, partition: Partition, written: asyncio.Future,
                      durable: asyncio.Future) -> None:
        """``written`` completed: fail ``durable`` with its error, or join the group commit."""
        if durable.done():
            return
        if written.cancelled():
            durable.cancel()
        elif written.exception() is not None:
            durable.set_exception(written.exception())
        else:
            self.group_commit.durable(partition, durable)

    # -- sessions -----------------------------------------------------------------
    def open_session(self, address: str, transport: int, connection: Any = None,
                     accepted_us: int | None = None) -> Session:
        """A new session; its login deadline runs from ``accepted_us`` (when its connection
        was accepted, before a TLS or WebSocket handshake; None: now)."""
        now = self.clock()
        session = Session(address, transport, last_seen_us=now,
                          logged_out_us=now if accepted_us is None else accepted_us)
        self.sessions[session.client_id] = session
        if connection is not None:
            self.connections[session.client_id] = connection
        audit.connection_opened(session)
        return session

    def resume_session(self, session: Session, connection: Any) -> None:
        """Register a session that arrived with a migrated connection."""
        session.closed = False
        session.last_seen_us = self.clock()
        if not session.authenticated:
            session.logged_out_us = session.last_seen_us
        self.sessions[session.client_id] = session
        self.connections[session.client_id] = connection

    async def adopt_connection(self, sock: Any, handoff: Any) -> None:
        """Serve a connection handed over by another shard (``Handoff``)."""
        session = Session(handoff.address, handoff.transport, client_id=handoff.client_id,
                          user_id=handoff.user_id, token_name=handoff.token_name,
                          user_created_at=handoff.user_created_at,
                          login_time_us=handoff.login_time_us)
        loop = asyncio.get_running_loop()
        await loop.connect_accepted_socket(
            lambda: self.connection_factory(session, handoff.pending), sock)

    def close_session(self, session: Session, migrated: bool = False) -> None:
        session.closed = True
        if not migrated:
            audit.connection_closed(self, session)
            self.leave_groups(session.client_id)
        self.sessions.pop(session.client_id, None)
        self.connections.pop(session.client_id, None)

    def leave_groups(self, client_id: int) -> None:
        """The client leaves every consumer group (with several shards, through the owner of
        group membership): it disconnected, or the server ended its login."""
        if self.cluster is not None:
            self.cluster.client_gone(client_id)
        else:
            self.forget_client(client_id)

    def forget_client(self, client_id: int) -> None:
        """Remove a disconnected client from every consumer group."""
        self.groups.drop_client(client_id, self._topic_by_ids)

    def groups_export(self) -> list[Any]:
        return [[s, t, g, [[m.id, m.client_id, list(m.partitions)] for m in rt.members.values()]]
                for (s, t, g), rt in self.groups.groups.items()]

    def groups_adopt(self, exported: list[Any]) -> None:
        """Take the metadata owner's group membership (keeping local round-robin cursors)."""
        adopted = {}
        for s, t, g, members in exported:
            old = self.groups.groups.get((s, t, g))
            runtime = GroupRuntime()
            for member_id, client_id, partitions in members:
                previous = old.members.get(client_id) if old else None
                cursor = previous.cursor if previous else 0
                runtime.members[client_id] = Member(member_id, client_id, list(partitions), cursor)
            adopted[(s, t, g)] = runtime
        self.groups.groups = adopted

    def own_memberships(self) -> list[tuple[int, int, int, int]]:
        """(stream, topic, group, client) for this shard's clients in the groups as last
        adopted from the metadata owner, in member order: what a restarted owner, which
        forgot every membership, is told when this shard subscribes again."""
        return [(s, t, g, m.client_id) for (s, t, g), rt in self.groups.groups.items()
                for m in sorted(rt.members.values(), key=lambda m: m.id)
                if m.client_id in self.sessions]

    def rejoin(self, memberships: list[tuple[int, int, int, int]]) -> int:
        """Join each (stream, topic, group, client) again that is not a member, where the
        group still exists; returns how many joined. (Several shards: a join rebalances
        fully, so no stored offset is needed to complete a revocation.)"""
        joined = 0
        for s, t, g, client_id in memberships:
            topic = self._topic_by_ids(s, t)
            runtime = self.groups.groups.get((s, t, g))
            if topic is None or g not in topic.groups or (
                    runtime is not None and client_id in runtime.members):
                continue
            self.groups.join(topic, g, client_id, self.clock(), lambda _pid: None)
            joined += 1
        return joined

    def _topic_by_ids(self, stream_id: int, topic_id: int) -> TopicMeta | None:
        stream = self.meta.state.streams.get(stream_id)
        return stream.topics.get(topic_id) if stream else None

    def authorize(self, session: Session, permission: str, request: Any) -> None:
        authorize(self.meta.state, session, permission, request)

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        self.closing = True
        for connection in list(self.connections.values()):
            connection.disconnect()
        for partition in self.partitions.values():
            partition.close()
        self.partitions.clear()
        ConsumerOffsets.drain()
        self.meta.close()
