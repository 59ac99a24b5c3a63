"""Consumer offset commands: get, store, delete (plain consumers and groups).

A get reads a group's offset without membership (``placement.read_target``) and answers
empty, as Iggy 0.8 does, when nothing is stored or the stream, topic, group or partition
does not exist; a store or delete of a group's offset needs a member owning the partition
(NOT_RESOLVED_CONSUMER otherwise, as in Iggy 0.8). A store takes an offset up to the
partition's last one, also when its messages were all deleted since (``check_storable``).

With ``enforce_fsync`` a store or delete answers once the offset file is on the device
(``ConsumerOffsets``): the handler then returns a coroutine, and ``after_stored`` is how a
handler runs what follows the store only after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from lurcher.core.shard.handlers.registry import handles
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import DeleteConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.shard.placement import read_target, resolve
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo


def offset_target(shard: ShardFace, session: Session, req: Any) -> tuple[Any, Any]:
    """The target of a store or delete and its partition. Raises IggyError; for a group
    member not assigned the partition (or any, without a partition id) NOT_RESOLVED_CONSUMER,
    as Iggy 0.8 does."""
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    target = resolve(shard, session, topic, req.consumer, req.partition_id, advance=False)
    if target.partition_id is None:
        raise IggyError(ErrorCode.NOT_RESOLVED_CONSUMER,
                        "the partition is not assigned to this member")
    return target, shard.partition(topic, target.partition_id)


def after_stored(pending: Awaitable | None, then: Callable[[], Any]) -> Any:
    """``then()`` at once when the store is done (``pending`` is None), else a coroutine
    that awaits ``pending`` first (its error is the command's)."""
    if pending is None:
        return then()

    async def when_stored() -> Any:
        await pending
        return then()
    return when_stored()


def read_offset_target(shard: ShardFace, req: GetConsumerOffset) -> tuple[Any, Any] | None:
    """The target of a GetConsumerOffset and its partition, or None when the stream, topic,
    group or partition does not exist (no membership needed: ``placement.read_target``)."""
    try:
        topic = shard.meta.state.topic(req.stream_id, req.topic_id)
        target = read_target(shard, topic, req.consumer, req.partition_id)
        return target, shard.partition(topic, target.partition_id)
    except IggyError:
        return None


@handles("get_consumer_offset")
def get_consumer_offset(shard: ShardFace, session: Session, req: GetConsumerOffset) -> Any:
    found = read_offset_target(shard, req)
    if found is None:
        return None
    target, partition = found
    stored = partition.get_offset(target.kind, target.key)
    if stored is None:
        return None
    return ConsumerOffsetInfo(partition.partition_id, partition.current_offset, stored)


def check_storable(partition: Any, offset: int) -> None:
    """Raises IggyError INVALID_OFFSET for an offset past the partition's last one, or any
    offset of a partition that never held a message, as Iggy 0.8 does: one whose messages
    were all deleted (segments deleted, expired) still takes offsets up to its last one."""
    never_held = partition.messages_count == 0 and partition.current_offset == 0
    if never_held or offset > partition.current_offset:
        raise IggyError(ErrorCode.INVALID_OFFSET,
                        f"offset {offset} is past the partition's last offset")


@handles("store_consumer_offset")
def store_consumer_offset(shard: ShardFace, session: Session, req: StoreConsumerOffset) -> Any:
    target, partition = offset_target(shard, session, req)
    check_storable(partition, req.offset)
    pending = partition.store_offset(target.kind, target.key, req.offset)
    if target.kind != "groups":
        return after_stored(pending, lambda: None)
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    return after_stored(pending, lambda: shard.groups.stored(
        topic, target.key, target.partition_id, req.offset))


@handles("delete_consumer_offset")
def delete_consumer_offset(shard: ShardFace, session: Session, req: DeleteConsumerOffset) -> Any:
    target, partition = offset_target(shard, session, req)
    return after_stored(partition.delete_offset(target.kind, target.key), lambda: None)
