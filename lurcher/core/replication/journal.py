"""The replica's write-ahead journal: records, their checksummed form, and storage intents.

The journal is append-only. Replaying its records in order rebuilds the durable part of a
replica: ``Format`` (first record; its absence means the disk was lost), ``ViewState``
(view and log_view), ``Append`` of one log entry, ``Truncate`` (drop ops after ``op``),
``Snapshot`` (a checkpoint: ops up to its op are replaced by its state, later ops are kept).
Each stored record is ``crc32 (u32 LE)`` of the rest, a tag byte (index in ``RECORD_TYPES`` + 1)
and the record's fields in the ``codec`` binary form; replay stops at the first record whose
checksum fails or that does not decode, which is how a torn last write shows up. Copies:
``record_parts`` gives a record as buffers in which request bodies are referenced, not copied
(the checksum is computed over the parts), for ``pwritev``; ``decode_records`` returns bodies as
views into the stored bytes.

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
from typing import Any, ClassVar

import msgspec

from lurcher.core.replication.codec import (
    PartsWriter, ReplicationWireError, read_struct, write_struct,
)
from lurcher.core.replication.messages import Checkpoint, Entry
from lurcher.core.wire.buffer import Reader


class Format(msgspec.Struct, frozen=True):
    replicas: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64",)


class ViewState(msgspec.Struct, frozen=True):
    view: int
    log_view: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64", "u64")


class Append(msgspec.Struct, frozen=True):
    entry: Entry
    SCHEMA: ClassVar[tuple[str, ...]] = ("entry",)


class Truncate(msgspec.Struct, frozen=True):
    op: int
    SCHEMA: ClassVar[tuple[str, ...]] = ("u64",)


class Snapshot(msgspec.Struct, frozen=True):
    checkpoint: Checkpoint
    SCHEMA: ClassVar[tuple[str, ...]] = ("ckpt",)


Record = Format | ViewState | Append | Truncate | Snapshot
RECORD_TYPES: tuple[type, ...] = (Format, ViewState, Append, Truncate, Snapshot)
_TAGS = {cls: i + 1 for i, cls in enumerate(RECORD_TYPES)}
StoredRecord = Any  # bytes-like, or a list of bytes-like parts (``record_parts``)


def record_parts(record: Record) -> list:
    """``record`` as stored, in parts: checksum, then the tagged fields (bodies by reference)."""
    w = PartsWriter()
    w.u8(_TAGS[type(record)])
    write_struct(w, record)
    parts = w.done_parts()
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    return [crc.to_bytes(4, "little"), *parts]


def encode_record(record: Record) -> bytes:
    return b"".join(record_parts(record))


def stored_bytes(raw: StoredRecord) -> Any:
    """A stored record as one bytes-like value (parts joined)."""
    return b"".join(raw) if isinstance(raw, list) else raw


def decode_records(stored: list[StoredRecord]) -> list[Record]:
    """The valid prefix of ``stored``: stops at the first torn or corrupt record."""
    records: list[Record] = []
    for raw in stored:
        record = _decode_record(stored_bytes(raw))
        if record is None:
            break
        records.append(record)
    return records


def _decode_record(raw: Any) -> Record | None:
    view = memoryview(raw)
    if len(view) < 5 or zlib.crc32(view[4:]) != int.from_bytes(view[:4], "little"):
        return None
    r = Reader(view, 5)
    tag = view[4]
    if not 1 <= tag <= len(RECORD_TYPES):
        return None
    try:
        record = read_struct(r, RECORD_TYPES[tag - 1])
    except ReplicationWireError:
        return None
    return record if r.remaining == 0 else None


class Write(msgspec.Struct, frozen=True):
    """``data``: the record as stored, bytes or a list of parts (``record_parts``)."""

    pos: int
    data: Any


class Sync(msgspec.Struct, frozen=True):
    upto: int


class Read(msgspec.Struct, frozen=True):
    pass


class Discard(msgspec.Struct, frozen=True):
    """Records before position ``below`` are no longer needed (a durable checkpoint covers them)."""

    below: int


StorageIntent = Write | Sync | Read | Discard
