"""The replica's write-ahead journal: records, their checksummed form, and storage intents.

The journal is append-only. Replaying its records in order rebuilds the durable part of a
replica: ``Format`` (first record; its absence means the disk was lost), ``ViewState``
(view and log_view), ``Append`` of one log entry, ``Truncate`` (drop ops after ``op``), ``Snapshot`` (a
checkpoint: ops up to its op are replaced by its state, later ops are kept).
Each stored record is ``crc32 (u32 LE) + msgpack``; replay stops at the first record whose
checksum fails, which is how a torn last write shows up.

Storage is driven by intents the replica emits and completions it receives:
``Write(pos, data)`` -> ``Replica.on_written(pos)``; ``Sync(upto)`` -> ``on_synced(upto)``
(records ``< upto`` are durable); ``Read()`` -> ``on_loaded(records, start)`` (the records
from position ``start`` on); ``Discard(below)`` lets storage drop records ``< below``.

Trimming: a checkpoint is journaled as a self-contained segment (``Format``, ``Snapshot``,
``ViewState``, the ``Append`` of every op above the checkpoint) at position p; only once
every record up to the segment's end is synced does the replica emit ``Discard(p)``. A crash
that tears the segment therefore leaves the previous segment, and the replay of the old
segment followed by a partial new one rebuilds the same state.
"""

from __future__ import annotations

import zlib

import msgspec

from lurcher.core.replication.messages import Checkpoint, Entry


class Format(msgspec.Struct, frozen=True, tag=True):
    replicas: int


class ViewState(msgspec.Struct, frozen=True, tag=True):
    view: int
    log_view: int


class Append(msgspec.Struct, frozen=True, tag=True):
    entry: Entry


class Truncate(msgspec.Struct, frozen=True, tag=True):
    op: int


class Snapshot(msgspec.Struct, frozen=True, tag=True):
    checkpoint: Checkpoint


Record = Format | ViewState | Append | Truncate | Snapshot

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Record)


def encode_record(record: Record) -> bytes:
    body = _encoder.encode(record)
    return zlib.crc32(body).to_bytes(4, "little") + body


def decode_records(stored: list[bytes]) -> list[Record]:
    """The valid prefix of ``stored``: stops at the first torn or corrupt record."""
    records: list[Record] = []
    for raw in stored:
        if len(raw) < 4 or zlib.crc32(raw[4:]) != int.from_bytes(raw[:4], "little"):
            break
        try:
            records.append(_decoder.decode(raw[4:]))
        except msgspec.DecodeError:
            break
    return records


class Write(msgspec.Struct, frozen=True):
    pos: int
    data: bytes


class Sync(msgspec.Struct, frozen=True):
    upto: int


class Read(msgspec.Struct, frozen=True):
    pass


class Discard(msgspec.Struct, frozen=True):
    """Records before position ``below`` are no longer needed (a durable checkpoint covers them)."""

    below: int


StorageIntent = Write | Sync | Read | Discard
