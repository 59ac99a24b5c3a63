"""Message commands: send (append a batch), poll (read stored bytes as they are), flush.

The send path does per-batch work only: choose the partition, validate and stamp the batch
vectorised, one write. The poll path answers the 16-byte prefix followed by the stored
message bytes, never re-encoding a message. A poll reply holds at most
``limits.max_poll_reply_bytes`` of messages (but always one message when there is one):
a poll of more is answered with fewer messages, found by a binary search of the index.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import logging
import struct

import numpy as np

from lurcher.core.shard.handlers.offsets import after_stored
from lurcher.core.shard.handlers.registry import handles
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.shard.placement import choose_partition, resolve
from lurcher.core.shard.reply import Parts, read_failure
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

POLL_PREFIX = struct.Struct("<IQI")
assert POLL_PREFIX.size == 16


@handles("send_messages")
def send_messages(shard: ShardFace, session: Session, req: SendMessages) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    pid = choose_partition(shard, topic, req.partitioning)
    partition = shard.partition(topic, pid)
    req.batch.validate()
    return shard.dedup.append((topic.stream_id, topic.id, pid), req.batch, shard.clock(),
                              lambda batch: shard.append(partition, batch))


def empty_poll(partition_id: int, current_offset: int) -> bytes:
    return POLL_PREFIX.pack(partition_id, current_offset, 0)


def messages_within(partition, polled, max_bytes: int) -> int:
    """How many of ``polled``'s messages (from its first) fit in ``max_bytes`` (at least 1)."""
    n, budget = 0, max_bytes
    for segment in partition.segments_from(polled.first_offset):
        a = max(polled.first_offset, segment.start_offset) - segment.start_offset
        b = min(polled.last_offset, segment.end_offset) - segment.start_offset
        if a > b:
            break
        base = segment.index.start_of(a)
        ends = segment.index.ends[a:b + 1]
        fit = int(np.searchsorted(ends, base + budget, side="right"))
        n += fit
        if fit <= b - a:
            break
        budget -= int(ends[-1]) - base
    return max(n, 1)


def within_reply_cap(shard: ShardFace, partition, read: Callable[[], Any]):
    """``read()``, a poll of ``partition``, shortened to what fits
    ``limits.max_poll_reply_bytes``. A segment file the poll cannot open (removed under the
    server, no descriptor left) is CANNOT_READ_FILE with one warning, as stored bytes that
    cannot be read are (``reply.read_failure``); a partition being deleted stays
    PARTITION_NOT_FOUND."""
    try:
        polled = read()
        cap = shard.limits.max_poll_reply_bytes
        if polled.total_bytes <= cap:
            return polled
        return partition.read_offset(polled.first_offset,
                                     messages_within(partition, polled, cap))
    except OSError as exc:
        raise read_failure(exc) from exc


async def read_ready(partition, polled) -> None:
    """Return once ``polled``'s bytes can be read without waiting for the device
    (``history_reads``: at once unless it reads history not in the page cache)."""
    warming = partition.history_reads.ready(polled)
    if warming is not None:
        await warming


@handles("poll_messages")
def poll_messages(shard: ShardFace, session: Session, req: PollMessages) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    target = resolve(shard, session, topic, req.consumer, req.partition_id, advance=True)
    if target.partition_id is None:
        return empty_poll(0, 0)
    partition = shard.partition(topic, target.partition_id)
    polled = within_reply_cap(shard, partition, lambda: partition.poll(
        req.strategy.kind, req.strategy.value, req.count, (target.kind, target.key)))
    if polled.count == 0:
        return empty_poll(partition.partition_id, partition.current_offset)
    pending = (partition.store_offset(target.kind, target.key, polled.last_offset)
               if req.auto_commit else None)
    warming = partition.history_reads.ready(polled)  # history off the device, off the loop

    def delivered() -> None:
        if target.kind == "groups":
            shard.groups.delivered(topic, target.key, target.partition_id, polled.last_offset,
                                   req.auto_commit)

    def reply() -> Parts:
        prefix = POLL_PREFIX.pack(partition.partition_id, partition.current_offset,
                                  polled.count)
        return Parts([prefix, polled], POLL_PREFIX.size + polled.total_bytes)

    def delivered_reply() -> Parts:
        delivered()
        return reply()
    if warming is None:
        return after_stored(pending, delivered_reply)
    if pending is None:
        delivered()  # when it would have been without the read: at once
    return _read_in_then(pending, delivered, warming, reply)


async def _read_in_then(pending: Awaitable | None, delivered: Callable[[], None],
                        warming: Awaitable, reply: Callable[[], Parts]) -> Parts:
    """A poll whose history is being read in: counted as delivered to its consumer group
    once its offset is stored (``pending``; when None the caller counted it), and answered
    once its bytes are in the page cache."""
    if pending is not None:
        await pending
        delivered()
    await warming
    return reply()


@handles("flush_unsaved_buffer")
def flush_unsaved_buffer(shard: ShardFace, session: Session, req: FlushUnsavedBuffer) -> Any:
    """With ``fsync``, fsync what the partition wrote since its last fsync, off the event
    loop (``Partition.flush_async``: the shard serves others meanwhile) and answered after;
    one that fails is CANNOT_WRITE_TO_FILE, as 0.8 answers a failed fsync of its segment
    files, and a log line."""
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    partition = shard.partition(topic, req.partition_id)
    if not req.fsync:
        return None
    try:
        flushed = partition.flush_async()
    except OSError as exc:
        raise _not_flushed(partition, exc) from exc
    return None if flushed is None else _flushed(partition, flushed)


async def _flushed(partition: Any, flushed: Awaitable[None]) -> None:
    try:
        await flushed
    except OSError as exc:
        raise _not_flushed(partition, exc) from exc


def _not_flushed(partition: Any, exc: OSError) -> IggyError:
    log.error("FlushUnsavedBuffer on %s: fsync failed: %s", partition.path, exc)
    return IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, f"not fsynced: {exc}")
