"""Partition and segment commands: create/delete partitions, delete segments.

Creating or deleting partitions rebalances every consumer group of the topic. Deleting
partitions removes the last N (their files, offsets and deduplication windows).
DeleteSegments deletes the oldest N sealed segments of a partition, never the open one nor
one holding messages past the lowest stored consumer offset (as 0.8 does); offsets are
kept, so the next message still gets the next offset. The segments leave the partition at
once (their files renamed aside) and their files are removed off the event loop; the command
is answered once they are gone (``Partition.set_oldest_segments_aside``). All or nothing: when
one file cannot be renamed aside, every segment stays, in memory as on disk, and the answer
is CANNOT_DELETE_FILE (10008), as 0.8 answers when it cannot remove a file; a file set aside
that cannot be removed is logged and removed at the next start (the command succeeds: the
segments are gone).
On a cluster node DeleteSegments is replicated instead (``lurcher.cluster.partitions``).

Partition counts are bounded twice: at most 1,000 per request (0.8's
``MAX_PARTITIONS_COUNT``, checked by the request codecs) and at most
``system.partition.max_partitions`` in the whole server (``check_partition_budget``); both
answer TOO_MANY_PARTITIONS (2015).
"""

from __future__ import annotations

import logging
from typing import Any

from lurcher.core.meta import events as ev
from lurcher.core.shard.handlers.registry import handles
from lurcher.core.shard.partition_files import create_partition_files
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.shard.tombstones import record_deletion
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)


def check_partition_budget(shard: ShardFace, more: int) -> None:
    """Raises IggyError TOO_MANY_PARTITIONS when ``more`` partitions would take the server
    past ``system.partition.max_partitions``."""
    limit = shard.config.typed.system.partition.max_partitions
    total = sum(topic.partitions_count for topic in shard.meta.state.topics())
    if total + more > limit:
        raise IggyError(ErrorCode.TOO_MANY_PARTITIONS,
                        f"{more} more partitions would exceed {limit} (server holds {total})")


@handles("create_partitions")
def create_partitions(shard: ShardFace, session: Session, req: CreatePartitions) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    check_partition_budget(shard, req.partitions_count)
    first = topic.partitions_count
    create_partition_files(shard, topic.stream_id, topic.id,
                           range(first, first + req.partitions_count))
    shard.meta.record(ev.PartitionsCreated(topic.stream_id, topic.id, req.partitions_count,
                                           shard.clock()))
    return None


@handles("delete_partitions")
def delete_partitions(shard: ShardFace, session: Session, req: DeletePartitions) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    if req.partitions_count > topic.partitions_count:
        raise IggyError(ErrorCode.INVALID_PARTITIONS_COUNT,
                        f"cannot delete {req.partitions_count} of {topic.partitions_count}")
    record_deletion(shard, ev.PartitionsDeleted(topic.stream_id, topic.id,
                                                     req.partitions_count))
    return None


@handles("delete_segments")
def delete_segments(shard: ShardFace, session: Session, req: DeleteSegments) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    partition = shard.partition(topic, req.partition_id)
    try:
        _segments, _messages, removal = partition.set_oldest_segments_aside(
            req.segments_count, partition.min_stored_offset())
    except OSError as exc:
        log.error("DeleteSegments on %s: %s", partition.path, exc)
        raise IggyError(ErrorCode.CANNOT_DELETE_FILE, f"segment not deleted: {exc}") from exc
    return removal
