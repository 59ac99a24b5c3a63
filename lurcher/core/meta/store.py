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
not decode is corruption too.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

import msgspec

from lurcher.core.faults import crash_point
from lurcher.core.log.io import PosixIo
from lurcher.core.meta.events import AnyEvent, Event
from lurcher.core.meta.state import MetaState
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

RECORD_HEADER = struct.Struct("<II")
assert RECORD_HEADER.size == 8

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyEvent)
_io = PosixIo()


class MetaLogCorrupt(Exception):
    """The metadata log cannot be replayed without losing or inventing changes."""


def record_at(data: bytes, pos: int) -> bytes | None:
    """The body of the complete, checksum-valid record at ``pos``, else None. No event
    encodes to nothing, so a zero length (as zero-filled bytes read) is no record."""
    if pos + RECORD_HEADER.size > len(data):
        return None
    length, crc = RECORD_HEADER.unpack_from(data, pos)
    start = pos + RECORD_HEADER.size
    body = data[start:start + length]
    return body if 0 < length == len(body) and zlib.crc32(body) == crc else None


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

    def __init__(self, path: Path, enforce_fsync: bool = False) -> None:
        """Open and replay ``path``. Raises MetaLogCorrupt, OSError."""
        self.path = path
        self.enforce_fsync = enforce_fsync
        self.state = MetaState()
        self.history: list[bytes] = []  # every event's encoded body, for replicas
        self.listeners: list = []  # called with each newly recorded body
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._end = 0  # where the next record goes
        self.events_count = self._replay()

    def _replay(self) -> int:
        data = _io.pread(self._fd, os.fstat(self._fd).st_size, 0)
        pos = 0
        while (body := record_at(data, pos)) is not None:
            try:
                event = _decoder.decode(body)
            except msgspec.DecodeError as exc:
                raise MetaLogCorrupt(f"metadata log {self.path}: record at byte {pos} does not "
                                     f"decode ({exc}); refusing to start") from None
            self.state.apply(event)
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
        os.ftruncate(self._fd, pos)

    def event_at(self, seq: int) -> Event | None:
        """The ``seq``-th recorded event (0-based), or None past the end."""
        return _decoder.decode(self.history[seq]) if 0 <= seq < len(self.history) else None

    def record(self, event: Event) -> None:
        """Persist ``event``, then apply it. Raises IggyError CANNOT_WRITE_TO_FILE when it
        cannot be written (nothing applied, nothing left in the log)."""
        body = _encoder.encode(event)
        crash_point(f"meta-recording:{type(event).__name__}")
        self._append(RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body)
        crash_point(f"meta-recorded:{type(event).__name__}")
        self.state.apply(event)
        self.history.append(body)
        self.events_count += 1
        for listener in self.listeners:
            listener(body)

    def _append(self, record: bytes) -> None:
        try:
            _io.pwrite(self._fd, record, self._end)
            if self.enforce_fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                            f"metadata log: {exc.strerror or exc}") from exc
        self._end += len(record)

    def _cut_back(self) -> None:
        """Drop a partial record (best effort: the next record overwrites it anyway)."""
        try:
            os.ftruncate(self._fd, self._end)
        except OSError as exc:
            log.error("metadata log %s: cannot cut a failed record off: %s", self.path, exc)

    @property
    def is_replica(self) -> bool:
        return False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class MetaReplica:
    """A read copy of the metadata on a shard that does not own it.

    Fed with the encoded events the metadata owner publishes, in order; ``catch_up``
    applies the history without observers (like a replay), ``apply_live`` with them.
    """

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
