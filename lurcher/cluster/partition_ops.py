"""The values a partition group carries (ops) and a node's calls to its primary carry.

Ops (``Op``, executed on every replica; see ``partitions`` for their meaning): ``Append``
(one send batch, its ids filled and its timestamp decided by the receiving node),
``StoreOffset``, ``DeleteOffset``, ``PurgePartition`` and ``DeleteSegmentsBelow`` (a
DeleteSegments as its primary decided it: the first offset kept). Calls: ``Poll`` (answered
with ``Polled``) and ``DeleteOldest`` (a DeleteSegments as the client asked it). Each
starts with ``Addressed``: the metadata count it was decided on and the partition, with its
creation time to tell it from a later partition of the same ids.
"""

from __future__ import annotations

import os

import msgspec
import numpy as np

from lurcher.core.shard.dedup import ID_BYTES, message_ids
from lurcher.core.wire.batch import ID_AT, MessageBatch

_ID_SPAN = np.arange(ID_BYTES, dtype=np.int64)


class Addressed(msgspec.Struct, array_like=True, frozen=True):
    """What every op and call starts with: the metadata it was decided on and the
    partition (ids and creation time)."""

    meta_base: int
    stream_id: int
    topic_id: int
    partition_id: int
    created_at: int


class Append(Addressed, tag=1):
    timestamp_us: int
    count: int
    index: bytes
    blob: memoryview  # decoded as a view into the op's body (a 1 MB batch is not copied)


class ConsumerAt(Addressed):
    kind: str
    key: int


class StoreOffset(ConsumerAt, tag=2):
    offset: int


class DeleteOffset(ConsumerAt, tag=3):
    pass


class PurgePartition(Addressed, tag=4):
    pass


class DeleteSegmentsBelow(Addressed, tag=5):
    below: int  # the sealed segments whose messages are all below it go


class DeleteOldest(Addressed):
    count: int  # a DeleteSegments: how many of the oldest segments


class Poll(ConsumerAt):
    strategy: int
    value: int
    count: int
    auto_commit: bool


class Polled(msgspec.Struct, array_like=True, frozen=True):
    last_offset: int  # -1: nothing polled
    payload: bytes


Op = Append | StoreOffset | DeleteOffset | PurgePartition | DeleteSegmentsBelow
op_decoder = msgspec.msgpack.Decoder(Op)
delete_oldest_decoder = msgspec.msgpack.Decoder(DeleteOldest)
poll_decoder = msgspec.msgpack.Decoder(Poll)
polled_decoder = msgspec.msgpack.Decoder(Polled)


def with_ids(batch: MessageBatch) -> bytearray:
    """The batch's blob (a copy) with every id left 0 replaced by a random one."""
    blob = bytearray(batch.blob)
    ids = message_ids(batch)
    zero = ids == np.zeros(1, dtype="V16")
    k = int(np.count_nonzero(zero))
    if k:
        at = (batch.starts()[zero] + ID_AT)[:, None] + _ID_SPAN
        np.frombuffer(blob, dtype=np.uint8)[at] = np.frombuffer(
            os.urandom(ID_BYTES * k), dtype=np.uint8).reshape(k, ID_BYTES)
    return blob
