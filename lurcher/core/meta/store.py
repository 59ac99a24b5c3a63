"""The metadata event log: append-only, replayed on start.

File ``<system.path>/state/log``: records of ``length u32, crc32 u32, msgpack event``.
``record`` writes a record completely (looping on short writes) at the log's end BEFORE the
change is applied in memory, so an acknowledged change survives a killed process; with
``enforce_fsync`` it also survives a power cut. A write that fails (ENOSPC, EIO, ...) fails
the command with CANNOT_WRITE_TO_FILE, applies nothing and cuts the partial record off (the
next record is written over it anyway, as records go at the logical end, not the file end).

Replay keeps records up to the first one that is incomplete or fails its checksum. If no
complete record follows it, that is the torn tail of a crash mid-write: it is cut off (with
a warning). If a complete record follows it, the log is corrupt in the middle: dropping the
rest would silently lose acknowledged changes, so ``MetaLogCorrupt`` stops the start with a
one-line message naming the byte position. A record whose checksum matches but which does
not decode, or does not apply to the state the records before it made (an id taken twice, a
topic of a stream that does not exist: logs joined, or a wrong file restored), stops the
start the same way.

Full disk: the store keeps ``RESERVE_BYTES`` allocated past the log's end (fallocate,
file size unchanged) and tops it up as records use it. When it cannot be topped up, a
record that frees space (a stream, topic or partitions deletion) may use all of it, any
other record only the first half; so an operator can always free a full disk by deleting
over the API. Where the file system cannot reserve, records are simply written.
"""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path

import msgspec

from lurcher.core.faults import crash_point
from lurcher.core.log.io import IoBackend, PosixIo, reserve_space
from lurcher.core.meta.events import (AnyEvent, Event, PartitionsDeleted, StreamDeleted,
                                      TopicDeleted)
from lurcher.core.meta.state import MetaState
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

RECORD_HEADER = struct.Struct("<II")
assert RECORD_HEADER.size == 8
RESERVE_BYTES = 64 * 1024
FREES_SPACE = (StreamDeleted, TopicDeleted, PartitionsDeleted)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyEvent)


class MetaLogCorrupt(Exception):
    """The metadata log cannot be replayed without losing or inventing changes."""


def record_at(data: bytes, pos: int) -> bytes | None:
    """The body of the complete, checksum-valid record at ``pos``, else None. No event
    encodes to nothing, so a zero length (as zero-filled bytes read) is no record."""
    if pos + RECORD_HEADER.size > len(data):
        return None
    length, crc = RECORD_HEADER.unpack_from(data, pos)
    start = pos + RECORD_HEADER.size
    if not 0 < length <= len(data) - start:
        return None
    body = data[start:start + length]
    return body if zlib.crc32(body) == crc else None


def next_record(data: bytes, after: int) -> int | None:
    """Position of the first complete record that decodes, starting past ``after``."""
    for pos in range(after + 1, len(data) - RECORD_HEADER.size):
        body = record_at(data, pos)
        if body is not None:
            try:
                _decoder.decode(body)
            except msgspec.DecodeError:
                continue
            return pos
    return None


class MetaStore:
    """Owns the event log file and the ``MetaState`` built from it."""

    defers_effects = False  # ``record`` applies at once (see ``cluster.meta_changes``)

    def __init__(self, path: Path, enforce_fsync: bool = False,
                 io: IoBackend | None = None) -> None:
        """Open and replay ``path``; file I/O goes through ``io`` (the shard's storage
        backend; posix when None). Raises MetaLogCorrupt, OSError."""
        self.path = path
        self.io = io or PosixIo()
        self.enforce_fsync = enforce_fsync
        self.state = MetaState()
        self.history: list[bytes] = []  # every event's encoded body, for replicas
        self.listeners: list = []  # called with each newly recorded body
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = self.io.open(str(path), create=True, mode=0o600)
        self._end = 0  # where the next record goes
        self._reserved_to = 0  # allocated up to here (past the end: the reserve)
        self._reserving = True  # False where the file system cannot reserve
        self.events_count = self._replay()
        self._top_up()

    def _replay(self) -> int:
        data = self.io.pread(self._fd, self.io.size(self._fd), 0)
        pos = 0
        while (body := record_at(data, pos)) is not None:
            try:
                event = _decoder.decode(body)
            except msgspec.DecodeError as exc:
                raise MetaLogCorrupt(f"metadata log {self.path}: record at byte {pos} does not "
                                     f"decode ({exc}); refusing to start") from None
            try:
                self.state.apply(event)
            except (KeyError, ValueError, IndexError) as exc:
                raise MetaLogCorrupt(
                    f"metadata log {self.path}: record at byte {pos} ({type(event).__name__}) "
                    f"does not apply to the records before it ({type(exc).__name__}: {exc}): "
                    f"two logs joined or a wrong file restored? refusing to start") from None
            self.history.append(body)
            pos += RECORD_HEADER.size + len(body)
        if pos != len(data):
            self._cut_torn_tail(data, pos)
        self._end = pos
        return len(self.history)

    def _cut_torn_tail(self, data: bytes, pos: int) -> None:
        later = next_record(data, pos)
        if later is not None:
            raise MetaLogCorrupt(
                f"metadata log {self.path}: damaged record at byte {pos} is followed by a "
                f"valid record at byte {later}; refusing to start rather than drop "
                f"acknowledged changes (restore the file, or truncate it to {pos} bytes "
                f"to accept losing everything from there)")
        log.warning("metadata log %s: dropping %d byte(s) of torn tail", self.path,
                    len(data) - pos)
        self.io.truncate(self._fd, pos)

    def event_at(self, seq: int) -> Event | None:
        """The ``seq``-th recorded event (0-based), or None past the end."""
        return _decoder.decode(self.history[seq]) if 0 <= seq < len(self.history) else None

    def record(self, event: Event) -> None:
        """Persist ``event``, then apply it. Raises IggyError CANNOT_WRITE_TO_FILE when it
        cannot be written (nothing applied, nothing left in the log)."""
        body = _encoder.encode(event)
        record = RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body
        self._check_room(event, len(record))
        crash_point(f"meta-recording:{type(event).__name__}")
        self._append(record)
        crash_point(f"meta-recorded:{type(event).__name__}")
        self.state.apply(event)
        self.history.append(body)
        self.events_count += 1
        for listener in self.listeners:
            listener(body)

    def _top_up(self) -> None:
        """Extend the reserve when a quarter of it is used (one fallocate per 16 KiB)."""
        if not self._reserving or self._reserved_to - self._end >= RESERVE_BYTES * 3 // 4:
            return
        reserved = reserve_space(self._fd, self._end, RESERVE_BYTES)
        if reserved is None:
            self._reserving = False
        elif reserved:
            self._reserved_to = self._end + RESERVE_BYTES

    def _check_room(self, event: Event, size: int) -> None:
        """Refuse a record that would eat into the half of the reserve kept for deletions."""
        self._top_up()
        if self._reserving and not isinstance(event, FREES_SPACE) \
                and self._end + size + RESERVE_BYTES // 2 > self._reserved_to:
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                            "metadata log: no space left on device (the rest of its reserved "
                            "space is kept for deletions)")

    def _append(self, record: bytes) -> None:
        try:
            self.io.pwrite(self._fd, record, self._end)
            if self.enforce_fsync:
                self.io.fsync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                            f"metadata log: {exc.strerror or exc}") from exc
        self._end += len(record)

    def _cut_back(self) -> None:
        """Drop a partial record (best effort: the next record overwrites it anyway)."""
        self._reserved_to = self._end  # truncating drops what was allocated past the end
        try:
            self.io.truncate(self._fd, self._end)
        except OSError as exc:
            log.error("metadata log %s: cannot cut a failed record off: %s", self.path, exc)

    @property
    def is_replica(self) -> bool:
        return False

    def close(self) -> None:
        if self._fd >= 0:
            self.io.close(self._fd)
            self._fd = -1


class MetaReplica:
    """A read copy of the metadata on a shard that does not own it.

    Fed with the encoded events the metadata owner publishes, in order; ``catch_up``
    applies the history without observers (like a replay), ``apply_live`` with them.
    """

    defers_effects = False

    def __init__(self) -> None:
        self.state = MetaState()
        self.events_count = 0

    @property
    def is_replica(self) -> bool:
        return True

    def apply_encoded(self, bodies: list[bytes]) -> None:
        for body in bodies:
            self.state.apply(_decoder.decode(body))
            self.events_count += 1

    def record(self, event: Event) -> None:
        raise RuntimeError("metadata changes run on the metadata owner (shard 0)")

    def close(self) -> None:
        return None
