"""Stored consumer offsets of one partition, persisted one file per consumer.

Layout (wire-protocol §17): ``offsets/consumers/<id>`` and ``offsets/groups/<id>``, each
8 bytes: the stored offset as u64 LE. A file is replaced atomically (write ``<id>.tmp``, then
rename), so a crash leaves either the old or the new value. The in-memory dicts mirror the
files and are loaded at open.
"""

from __future__ import annotations

import os
import struct
from typing import Literal

from lurcher.core.log.io import IoBackend
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

OffsetKind = Literal["consumers", "groups"]
KINDS: tuple[OffsetKind, ...] = ("consumers", "groups")
OFFSETS_DIR = "offsets"
_U64 = struct.Struct("<Q")
_TMP = ".tmp"


class ConsumerOffsets:
    """Stored offsets per (kind, key)."""

    __slots__ = ("directory", "io", "fsync", "_values")

    def __init__(self, partition_dir: str, io: IoBackend, fsync: bool = False) -> None:
        self.directory = os.path.join(partition_dir, OFFSETS_DIR)
        self.io = io
        self.fsync = fsync
        self._values: dict[str, dict[int, int]] = {kind: {} for kind in KINDS}

    def _dir(self, kind: str) -> str:
        if kind not in self._values:
            raise ValueError(f"offset kind must be one of {KINDS}, not {kind!r}")
        return os.path.join(self.directory, kind)

    def load(self) -> None:
        """Create the directories and read every stored offset (malformed files are skipped)."""
        for kind in KINDS:
            path = self._dir(kind)
            os.makedirs(path, exist_ok=True)
            values = self._values[kind]
            values.clear()
            for name in os.listdir(path):
                if name.isdigit():
                    value = self._read(os.path.join(path, name))
                    if value is not None:
                        values[int(name)] = value

    def _read(self, path: str) -> int | None:
        fd = self.io.open(path, create=False)
        try:
            raw = self.io.pread(fd, _U64.size + 1, 0)
        finally:
            self.io.close(fd)
        return _U64.unpack(raw)[0] if len(raw) == _U64.size else None

    def get(self, kind: OffsetKind, key: int) -> int | None:
        self._dir(kind)
        return self._values[kind].get(key)

    def store(self, kind: OffsetKind, key: int, offset: int) -> None:
        """Persist ``offset`` for (kind, key). Raises ValueError (kind), OSError."""
        path = os.path.join(self._dir(kind), str(int(key)))
        fd = self.io.open(path + _TMP)
        try:
            self.io.truncate(fd, 0)
            self.io.pwrite(fd, _U64.pack(offset), 0)
            if self.fsync:
                self.io.fsync(fd)
        finally:
            self.io.close(fd)
        self.io.replace(path + _TMP, path)
        self._values[kind][key] = offset

    def delete(self, kind: OffsetKind, key: int) -> None:
        """Remove the stored offset. Raises IggyError CONSUMER_OFFSET_NOT_FOUND when absent."""
        path = os.path.join(self._dir(kind), str(int(key)))
        if self._values[kind].pop(key, None) is None:
            raise IggyError(ErrorCode.CONSUMER_OFFSET_NOT_FOUND, f"{kind} {key}")
        self.io.remove(path)

    def clear(self) -> None:
        """Delete every stored offset (files and memory)."""
        for kind in KINDS:
            for key in list(self._values[kind]):
                self.delete(kind, key)

    def items(self, kind: OffsetKind) -> dict[int, int]:
        """A copy of the stored offsets of ``kind``."""
        self._dir(kind)
        return dict(self._values[kind])
