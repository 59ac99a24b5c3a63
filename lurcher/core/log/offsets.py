"""Stored consumer offsets of one partition, persisted one file per consumer.

Layout (wire-protocol §17): ``offsets/consumers/<id>`` and ``offsets/groups/<id>``, each
8 bytes: the stored offset as u64 LE. A file is replaced atomically (write ``<id>.tmp``, then
rename), so a crash leaves either the old or the new value. The in-memory dicts mirror the
files and are loaded at open.

Without fsync (the default) a store or delete changes the file in the page cache and the
dict at once, on the caller's thread. With fsync (``enforce_fsync``) the event loop never
waits for the device: ``store`` and ``delete`` return a future, and the process's offsets
thread (one ``WriterThread``, first in first out) writes the temporary file, fsyncs it,
renames it and fsyncs the directory (or removes the file and fsyncs the directory), so the
files end as the calls left them. A stored value enters the dict once it is on the device,
and only if it is still the key's latest call then (memory never shows a value the device
may not have, nor one a later call replaced); a delete leaves the dict at once. A failed
write fails the future with CANNOT_WRITE_TO_FILE and stores nothing in memory. ``clear`` (a
purge) is immediate; the writes still queued then are dropped from memory, and a removal
queued behind them deletes any file they leave.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Callable
from typing import Literal

from lurcher.core.log.io import IoBackend, WriterThread
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

OffsetKind = Literal["consumers", "groups"]
KINDS: tuple[OffsetKind, ...] = ("consumers", "groups")
OFFSETS_DIR = "offsets"
_U64 = struct.Struct("<Q")
_TMP = ".tmp"


def fsync_directory(io: IoBackend, path: str) -> None:
    """fsync the directory ``path`` (so a rename or removal in it is on the device) through
    ``io``'s worker-thread fsync. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        io.fsync_in_worker(fd)
    finally:
        os.close(fd)


class ConsumerOffsets:
    """Stored offsets per (kind, key)."""

    __slots__ = ("directory", "io", "fsync", "_values", "_generation", "_calls", "_latest")
    _writer = WriterThread("lurcher-offsets")  # one per process, for every partition

    def __init__(self, partition_dir: str, io: IoBackend, fsync: bool = False) -> None:
        self.directory = os.path.join(partition_dir, OFFSETS_DIR)
        self.io = io
        self.fsync = fsync
        self._values: dict[str, dict[int, int]] = {kind: {} for kind in KINDS}
        self._generation = 0  # advanced by ``clear``: writes queued before it are dropped
        self._calls = 0  # with fsync: calls queued so far
        self._latest: dict[tuple[str, int], int] = {}  # key -> its last queued call, in flight

    def _dir(self, kind: str) -> str:
        if kind not in self._values:
            raise ValueError(f"offset kind must be one of {KINDS}, not {kind!r}")
        return os.path.join(self.directory, kind)

    def _path(self, kind: str, key: int) -> str:
        return os.path.join(self._dir(kind), str(int(key)))

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

    def store(self, kind: OffsetKind, key: int, offset: int) -> asyncio.Future | None:
        """Persist ``offset`` for (kind, key): None once done, or with fsync a future (module
        doc). Raises ValueError (kind), OSError (without fsync)."""
        path = self._path(kind, key)
        values = self._values[kind]
        if self.fsync:
            return self._queue((kind, key), lambda: self._replace(path, offset),
                               lambda: values.__setitem__(key, offset))
        self._replace(path, offset)
        values[key] = offset
        return None

    def delete(self, kind: OffsetKind, key: int) -> asyncio.Future | None:
        """Remove the stored offset: None once done, or with fsync a future (module doc).
        Raises IggyError CONSUMER_OFFSET_NOT_FOUND when absent."""
        path = self._path(kind, key)
        values = self._values[kind]
        if key not in values:
            raise IggyError(ErrorCode.CONSUMER_OFFSET_NOT_FOUND, f"{kind} {key}")
        del values[key]
        if self.fsync:
            return self._queue((kind, key), lambda: self._remove(path), lambda: None)
        self.io.remove(path)
        return None

    def clear(self) -> None:
        """Delete every stored offset (files and memory) now, and with fsync any file a
        write still queued leaves behind."""
        self._generation += 1
        in_flight = bool(self._latest)  # a key is there while a call for it is queued
        self._latest.clear()
        for kind in KINDS:
            for key in list(self._values[kind]):
                del self._values[kind][key]
                self.io.remove(self._path(kind, key))
        if in_flight:
            self._writer.run(self._remove_all, _log_failed_removal)

    def items(self, kind: OffsetKind) -> dict[int, int]:
        """A copy of the stored offsets of ``kind``."""
        self._dir(kind)
        return dict(self._values[kind])

    # -- the files -----------------------------------------------------------------------

    def _replace(self, path: str, offset: int) -> None:
        """Write ``offset`` to ``path`` through a temporary file and a rename (with fsync:
        the file before the rename, the directory after)."""
        fd = self.io.open(path + _TMP)
        try:
            self.io.truncate(fd, 0)
            self.io.pwrite(fd, _U64.pack(offset), 0)
            if self.fsync:
                self.io.fsync_in_worker(fd)
        finally:
            self.io.close(fd)
        self.io.replace(path + _TMP, path)
        if self.fsync:
            fsync_directory(self.io, os.path.dirname(path))

    def _remove(self, path: str) -> None:
        self.io.remove(path)
        fsync_directory(self.io, os.path.dirname(path))

    def _remove_all(self) -> None:
        for kind in KINDS:
            directory = self._dir(kind)
            for name in os.listdir(directory):
                self.io.remove(os.path.join(directory, name))
            fsync_directory(self.io, directory)

    def _queue(self, key: tuple[str, int], job: Callable[[], None],
               apply: Callable[[], object]) -> asyncio.Future | None:
        """Run ``job`` on the offsets thread; a future that resolves after it, once
        ``apply`` changed memory (only if this is still the key's latest call and ``clear``
        did not run meanwhile). With no event loop running (start-up), both run here and
        now, and None is returned (the job's OSError propagates)."""
        try:
            future = asyncio.get_running_loop().create_future()
        except RuntimeError:
            job()
            apply()
            return None
        generation = self._generation
        self._calls += 1
        call = self._latest[key] = self._calls

        def done(error: OSError | None) -> None:
            if self._latest.get(key) == call and generation == self._generation:
                del self._latest[key]
                if error is None:
                    apply()
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                                               f"consumer offset not stored: {error}"))

        self._writer.run(job, done)
        return future


def _log_failed_removal(error: OSError | None) -> None:
    if error is not None:
        log.error("removing purged consumer offset files failed: %s", error)
