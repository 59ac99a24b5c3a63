"""Which shard runs a command, when there is more than one.

Each command's kind is its spec's ``routing`` (``core.wire.commands``); ``ROUTES`` is the
same by name:

* ``local``: any shard answers from its own state (ping, logins, reads of users, tokens,
  groups — the metadata and group membership are replicated to every shard).
* ``meta``: metadata changes run on shard 0, the metadata owner; the change reaches every
  shard before the reply does (same ordered link).
* ``owner``: reads only shard 0 can answer (cluster metadata: shard 0 runs the cluster
  node); forwarded there, nothing published.
* ``gather``: answered here after fetching the other shards' partition counters and
  sessions (stream/topic views, stats, clients).
* ``broadcast``: every shard does its part (purges).
* ``partition``: the owner of the addressed partition runs it. The partition is resolved
  here (balanced partitioning, a group member's next partition), the request rewritten
  with that explicit partition and forwarded, or the connection migrated to the owner
  when it keeps addressing that shard.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lurcher.core.shard.placement import choose_partition, read_target, resolve
from lurcher.core.wire.commands import (  # noqa: F401 (re-exported kinds)
    BROADCAST, COMMANDS, GATHER, LOCAL, META, OWNER, PARTITION)
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.values.partitioning import Partitioning, PartitioningKind

# Every command's kind, derived from the command registry (``CommandSpec.routing``).
ROUTES: dict[str, str] = {spec.name: spec.routing for spec in COMMANDS.values()}


class Placement:
    """Where a partition command runs: ``request`` (rewritten with an explicit partition),
    the owning shard, and whether that partition was named by the client (``pinned``;
    only pinned traffic migrates a connection). ``shard_id`` None = run here as is."""

    __slots__ = ("request", "shard_id", "pinned")

    def __init__(self, request: Any, shard_id: int | None, pinned: bool) -> None:
        self.request, self.shard_id, self.pinned = request, shard_id, pinned


def _place_send(shard, session, req) -> Placement:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    pinned = req.partitioning.kind != PartitioningKind.BALANCED
    pid = choose_partition(shard, topic, req.partitioning)
    if req.partitioning.kind != PartitioningKind.PARTITION_ID:
        req = msgspec.structs.replace(req, partitioning=Partitioning.partition(pid))
    return Placement(req, shard.owner(topic.stream_id, topic.id, pid), pinned)


def _place_consumer(shard, session, req, advance: bool) -> Placement:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    target = resolve(shard, session, topic, req.consumer, req.partition_id, advance)
    return _place_target(shard, topic, req, target)


def _place_offset_read(shard, session, req) -> Placement:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    return _place_target(shard, topic, req, read_target(shard, topic, req.consumer,
                                                         req.partition_id))


def _place_target(shard, topic, req, target) -> Placement:
    """Where a consumer's request runs once its target partition is known."""
    pinned = req.partition_id is not None and not req.consumer.is_group
    if target.partition_id is None:
        return Placement(req, None, False)
    if req.partition_id is None:
        req = msgspec.structs.replace(req, partition_id=target.partition_id)
    return Placement(req, shard.owner(topic.stream_id, topic.id, target.partition_id), pinned)


def _place_explicit(shard, session, req) -> Placement:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    return Placement(req, shard.owner(topic.stream_id, topic.id, req.partition_id), True)


_PLACE = {
    "send_messages": _place_send,
    "poll_messages": lambda shard, session, req: _place_consumer(shard, session, req, True),
    "get_consumer_offset": _place_offset_read,
    "store_consumer_offset":
        lambda shard, session, req: _place_consumer(shard, session, req, False),
    "delete_consumer_offset":
        lambda shard, session, req: _place_consumer(shard, session, req, False),
    "flush_unsaved_buffer": _place_explicit,
    "delete_segments": _place_explicit,
}


def place(shard, session, name: str, request: Any) -> Placement:
    """Where ``request`` runs. Lookup failures leave it here: the handler raises them."""
    try:
        return _PLACE[name](shard, session, request)
    except IggyError:
        return Placement(request, None, False)
