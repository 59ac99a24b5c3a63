"""The metadata event log: append-only, replayed on start.

File ``<system.path>/state/log``: records of ``length u32, crc32 u32, msgpack event``.
A record is written with one ``os.write`` before the change is applied in memory, so an
acknowledged metadata change survives a killed process; with ``enforce_fsync`` it also
survives a power cut. A torn or corrupt tail (a crash mid-write) is truncated on open;
everything before it is kept.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path

import msgspec

from lurcher.core.meta.events import AnyEvent, Event
from lurcher.core.meta.state import MetaState

log = logging.getLogger(__name__)

RECORD_HEADER = struct.Struct("<II")
assert RECORD_HEADER.size == 8

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyEvent)


class MetaStore:
    """Owns the event log file and the ``MetaState`` built from it."""

    def __init__(self, path: Path, enforce_fsync: bool = False) -> None:
        self.path = path
        self.enforce_fsync = enforce_fsync
        self.state = MetaState()
        self.history: list[bytes] = []  # every event's encoded body, for replicas
        self.listeners: list = []  # called with each newly recorded body
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.events_count = self._replay()

    def _replay(self) -> int:
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        pos = count = 0
        while pos + RECORD_HEADER.size <= len(data):
            length, crc = RECORD_HEADER.unpack_from(data, pos)
            body = data[pos + RECORD_HEADER.size: pos + RECORD_HEADER.size + length]
            if len(body) < length or zlib.crc32(body) != crc:
                break
            self.state.apply(_decoder.decode(body))
            self.history.append(body)
            pos += RECORD_HEADER.size + length
            count += 1
        if pos != len(data):
            log.warning("metadata log %s: dropping %d byte(s) of torn tail", self.path,
                        len(data) - pos)
            os.ftruncate(self._fd, pos)
        os.lseek(self._fd, pos, os.SEEK_SET)
        return count

    def record(self, event: Event) -> None:
        """Persist ``event``, then apply it. Raises OSError if it cannot be written."""
        body = _encoder.encode(event)
        os.write(self._fd, RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body)
        if self.enforce_fsync:
            os.fsync(self._fd)
        self.state.apply(event)
        self.history.append(body)
        self.events_count += 1
        for listener in self.listeners:
            listener(body)

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
