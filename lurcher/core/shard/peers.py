"""What shards ask each other over the bus, and how each shard answers.

* ``Forward``: run a command for a client of another shard (the payload is the request's
  binary form; the session travels as ids) -> ``Reply(status, payload)``.
* ``StatsQuery``: this shard's partition counters and sessions (for views and stats); with
  ``peers``, on a cluster node's shard 0, also those of partitions other nodes hold
  (``lurcher.cluster.peer_stats``).
* ``Subscribe`` (to shard 0): every metadata event so far, then live ``MetaEvents``.
* ``GroupsUpdate`` (from shard 0): membership of consumer groups after a change.
* ``Barrier`` (from shard 0): answered after the events before it were applied, so a
  metadata change is acknowledged only once every shard has it.
* ``ClientGone`` (to shard 0): a client disconnected (leave its groups).
* ``Purge``: purge the partitions this shard owns of a stream or topic.
"""

from __future__ import annotations

import msgspec

from lurcher.core.shard.bus import BusMessage


class Forward(BusMessage, frozen=True):
    client_id: int = 0
    user_id: int | None = None
    address: str = ""
    transport: int = 1
    code: int = 0
    payload: bytearray = bytearray()  # writable: a forwarded send is stamped in place
    # the rest of the login (``Session``), so the running shard's checks of it
    # (``auth.permissions.stale_login``, again after a handler's await) see all of it
    user_created_at: int | None = None
    token_name: str | None = None


class StatsQuery(BusMessage, frozen=True):
    peers: bool = False


# the commands that show partition counters: a cluster node refreshes those of partitions
# other nodes hold before running them (``StatsQuery.peers``, ``lurcher.cluster.peer_stats``)
SHOWING_COUNTERS = frozenset({"get_stream", "get_streams", "get_topic", "get_topics",
                              "get_stats"})


class PartitionStats(msgspec.Struct, array_like=True, frozen=True):
    stream_id: int
    topic_id: int
    partition_id: int
    created_at: int
    segments_count: int
    current_offset: int
    size_bytes: int
    messages_count: int


class SessionInfo(msgspec.Struct, array_like=True, frozen=True):
    client_id: int
    user_id: int | None
    transport: int
    address: str


class ShardStats(msgspec.Struct, frozen=True):
    partitions: list[PartitionStats]
    sessions: list[SessionInfo]


class Subscribe(BusMessage, frozen=True):
    shard_id: int = 0
    # (stream_id, topic_id, group_id, client_id): the subscriber's clients' memberships
    members: list[tuple[int, int, int, int]] = []
    owner_started_at: int = 0  # the owner's start time the subscriber last saw (0: none)


class MetaEvents(BusMessage, frozen=True):
    events: list[bytes] = []


class GroupsUpdate(BusMessage, frozen=True):
    # (stream_id, topic_id, group_id) -> [(member_id, client_id, [partition ids])]
    groups: list[tuple[int, int, int, list[tuple[int, int, list[int]]]]] = []


class Barrier(BusMessage, frozen=True):
    """Answered once everything sent before it on the link was applied."""


class ClientGone(BusMessage, frozen=True):
    client_id: int = 0


class Purge(BusMessage, frozen=True):
    stream_id: int = 0
    topic_id: int | None = None


MESSAGE_TYPES = (Forward, StatsQuery, Subscribe, MetaEvents, GroupsUpdate, Barrier, ClientGone,
                 Purge)
