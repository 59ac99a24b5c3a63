"""Stored consumer offsets of one partition, persisted one file per consumer.

Layout (wire-protocol §17): ``offsets/consumers/<id>`` and ``offsets/groups/<id>``, each
8 bytes: the stored offset as u64 LE. A file is replaced atomically (write ``<id>.tmp``, then
rename), so a crash leaves either the old or the new value. The in-memory dicts mirror the
files and are loaded at open.

Without fsync (the default) a store or delete changes the file in the page cache and the
dict at once, on the caller's thread. With fsync (``enforce_fsync``) the event loop never
waits for the device: ``store`` and ``delete`` return a future, and the process's offsets
thread (one ``WriterThread``, first in first out) writes the temporary file, fsyncs it,
renames it and fsyncs the directory (or removes the file and fsyncs the directory). It works
through a descriptor of the directory opened at the call, so a call still queued when its
topic is deleted never lands in a topic re-created under the same id. Every removal and
rename, on either path, goes through the ``IoBackend`` (``remove``/``replace``, relative to
that descriptor on the offsets thread), so a fault-injecting backend sees them all.

Two views, with fsync: the dict holds what the device has (each call's effect is applied
when it succeeded, in call order, so a failed call leaves the previous value); ``get``,
``items`` and ``delete``'s existence check see what the key's last call leaves, queued or
not, so a poll reads on from an offset being stored and a delete (a deleted group's) also
removes an offset whose store is still queued. A failed call fails its future with
CANNOT_WRITE_TO_FILE. ``clear`` (a purge) is immediate; the calls still queued then change
no memory, and a removal queued behind them deletes any file they leave (``clear``'s future:
a purge is answered, and its marker goes, only after it).
A call that fails at once (its file or directory cannot be opened: descriptors used up; a
failed write without fsync) raises IggyError and changes nothing in memory
(``_refusal``): CANNOT_OPEN_CONSUMER_OFFSETS_FILE, CANNOT_WRITE_TO_FILE (a full disk, a
failed write) or CANNOT_DELETE_CONSUMER_OFFSET_FILE.
A clean stop (``Shard.close``) waits up to ``DRAIN_TIMEOUT_S`` for the calls queued before
it (``drain``); the thread is a daemon and ends with the process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Callable
from typing import Literal

from lurcher.core.log.io import IoBackend, WriterThread, is_no_space
from lurcher.core.log.segment import number_in_name
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

OffsetKind = Literal["consumers", "groups"]
KINDS: tuple[OffsetKind, ...] = ("consumers", "groups")
OFFSETS_DIR = "offsets"
_U64 = struct.Struct("<Q")
_TMP = ".tmp"
DRAIN_TIMEOUT_S = 5.0  # within the supervisor's 20 s for a clean stop, with listeners and fsyncs


class ConsumerOffsets:
    """Stored offsets per (kind, key)."""

    __slots__ = ("directory", "io", "fsync", "_values", "_generation", "_calls", "_pending")
    _writer = WriterThread("lurcher-offsets")  # one per process, for every partition

    def __init__(self, partition_dir: str, io: IoBackend, fsync: bool = False) -> None:
        self.directory = os.path.join(partition_dir, OFFSETS_DIR)
        self.io = io
        self.fsync = fsync
        self._values: dict[str, dict[int, int]] = {kind: {} for kind in KINDS}
        self._generation = 0  # advanced by ``clear``: calls queued before it are dropped
        self._calls = 0  # with fsync: calls queued so far
        # with fsync: key -> (its last call still queued, the value it leaves; None: deleted)
        self._pending: dict[tuple[str, int], tuple[int, int | None]] = {}

    @classmethod
    def drain(cls, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """At shutdown: let the offsets thread finish the calls queued so far (fsync mode),
        so a clean stop keeps what consumers stored just before it (logged when it cannot
        within ``timeout``)."""
        if not cls._writer.drain(timeout):
            log.error("shutdown: consumer offsets still queued after %.0f s are not stored",
                      timeout)

    def _dir(self, kind: str) -> str:
        if kind not in self._values:
            raise ValueError(f"offset kind must be one of {KINDS}, not {kind!r}")
        return os.path.join(self.directory, kind)

    def _path(self, kind: str, key: int) -> str:
        return os.path.join(self._dir(kind), str(int(key)))

    def load(self) -> None:
        """Create the directories and read every stored offset. Files not named by a u64
        are not the server's (a ``.tmp`` left by a crash among them) and are ignored; a
        numbered file of another length than 8 bytes (cut short or grown by damage, or
        empty after a power loss) is skipped with a warning naming it: that consumer or
        group has no stored offset (it polls "next" from the first message again).
        Raises OSError."""
        for kind in KINDS:
            path = self._dir(kind)
            os.makedirs(path, exist_ok=True)
            values = self._values[kind]
            values.clear()
            for name in os.listdir(path):
                key = number_in_name(name)
                if key is None:
                    continue
                file = os.path.join(path, name)
                raw = self._read(file)
                if len(raw) == _U64.size:
                    values[key] = _U64.unpack(raw)[0]
                else:
                    log.warning("stored offset file %s holds %s bytes, not %d: ignored (%s %d "
                                "has no stored offset)", file,
                                len(raw) if len(raw) <= _U64.size else "more than 8",
                                _U64.size, kind, key)

    def _read(self, path: str) -> bytes:
        """The file's first 9 bytes at most (8 when it is well formed). Raises OSError."""
        fd = self.io.open(path, create=False)
        try:
            return self.io.pread(fd, _U64.size + 1, 0)
        finally:
            self.io.close(fd)

    def get(self, kind: OffsetKind, key: int) -> int | None:
        """The offset the key's last call left (module doc), or None."""
        self._dir(kind)
        pending = self._pending.get((kind, key))
        return pending[1] if pending is not None else self._values[kind].get(key)

    def items(self, kind: OffsetKind) -> dict[int, int]:
        """A copy of the offsets of ``kind`` as the last calls left them."""
        self._dir(kind)
        values = dict(self._values[kind])
        for (pending_kind, key), (_call, value) in self._pending.items():
            if pending_kind != kind:
                continue
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        return values

    def store(self, kind: OffsetKind, key: int, offset: int) -> asyncio.Future | None:
        """Persist ``offset`` for (kind, key): None once done, or with fsync a future (module
        doc). Raises ValueError (kind), OSError."""
        self._dir(kind)
        values = self._values[kind]
        if self.fsync:
            folder, name = self._open_dir_for_call(kind), str(int(key))
            return self._queue((kind, key), offset,
                               lambda: self._durable_replace(folder, name, offset),
                               lambda: values.__setitem__(key, offset))
        try:
            self._replace(self._path(kind, key), offset)
        except OSError as exc:
            raise _refusal(exc, ErrorCode.CANNOT_WRITE_TO_FILE) from exc
        values[key] = offset
        return None

    def delete(self, kind: OffsetKind, key: int) -> asyncio.Future | None:
        """Remove the stored offset: None once done, or with fsync a future (module doc).
        Raises IggyError CONSUMER_OFFSET_NOT_FOUND when absent (after the key's last call),
        OSError."""
        if self.get(kind, key) is None:
            raise IggyError(ErrorCode.CONSUMER_OFFSET_NOT_FOUND, f"{kind} {key}")
        values = self._values[kind]
        if self.fsync:
            folder, name = self._open_dir_for_call(kind), str(int(key))
            return self._queue((kind, key), None, lambda: self._durable_remove(folder, name),
                               lambda: values.pop(key, None))
        try:
            self.io.remove(self._path(kind, key))
        except OSError as exc:
            raise _refusal(exc, ErrorCode.CANNOT_DELETE_CONSUMER_OFFSET_FILE) from exc
        del values[key]
        return None

    def clear(self) -> asyncio.Future | None:
        """Delete every stored offset (files and memory) now, and with fsync any file a
        call still queued leaves behind: a future of that removal's outcome
        (``_remove_left_by_queued_calls``), or None when no call was queued. Raises OSError
        when a file cannot be removed: the offsets not removed yet stay, in memory as on
        disk, and the queued calls go on."""
        for kind in KINDS:
            for key in list(self._values[kind]):
                self.io.remove(self._path(kind, key))
                del self._values[kind][key]
        queued = bool(self._pending)
        self._generation += 1
        self._pending.clear()
        return self._remove_left_by_queued_calls() if queued else None

    def _remove_left_by_queued_calls(self) -> asyncio.Future:
        """Queue the removal of every file in the offsets directories behind the calls
        queued so far (on the offsets thread); a future of its outcome: None once done,
        else its OSError (logged), also when it cannot be queued (``_open_dirs``)."""
        removed = asyncio.get_running_loop().create_future()
        try:
            folders = self._open_dirs()
        except OSError as exc:
            removed.set_result(exc)
            return removed

        def done(error: OSError | None) -> None:
            _log_failed_removal(error)
            if not removed.done():
                removed.set_result(error)

        self._writer.run(lambda: self._durable_remove_all(folders), done)
        return removed

    def lowest(self) -> int | None:
        """The lowest offset any consumer or group may still have, for retention: per key
        the lower of what the device has and what a queued call leaves (a queued store or
        delete may yet fail and leave the stored value); None when none is stored."""
        offsets = [v for values in self._values.values() for v in values.values()]
        offsets += [v for _call, v in self._pending.values() if v is not None]
        return min(offsets) if offsets else None

    # -- the files -----------------------------------------------------------------------

    def _replace(self, path: str, offset: int) -> None:
        """Without fsync: write ``offset`` to ``path`` through a temporary file and a rename.
        Raises IggyError (the file cannot be opened: ``_refusal``), OSError."""
        try:
            fd = self.io.open(path + _TMP)
        except OSError as exc:
            raise _refusal(exc, ErrorCode.CANNOT_OPEN_CONSUMER_OFFSETS_FILE) from exc
        try:
            self.io.truncate(fd, 0)
            self.io.pwrite(fd, _U64.pack(offset), 0)
        finally:
            self.io.close(fd)
        self.io.replace(path + _TMP, path)

    def _open_dir(self, kind: str) -> int:
        """A descriptor of the kind's directory, opened on the caller's thread (the offsets
        thread then works in this directory, wherever it is moved: a deleted topic's goes
        to the graveyard, and a queued write never lands in a re-created topic's)."""
        return os.open(self._dir(kind), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def _open_dir_for_call(self, kind: str) -> int:
        """``_open_dir`` for a store or delete. Raises IggyError (``_refusal``)."""
        try:
            return self._open_dir(kind)
        except OSError as exc:
            raise _refusal(exc, ErrorCode.CANNOT_OPEN_CONSUMER_OFFSETS_FILE) from exc

    def _open_dirs(self) -> list[int]:
        """Descriptors of both kinds' directories (for ``clear``'s queued removal). Raises
        OSError when they cannot be opened (logged, none left open: the files of calls
        queued before are then left to the next start, which finishes the purge)."""
        folders: list[int] = []
        try:
            for kind in KINDS:
                folders.append(self._open_dir(kind))
        except OSError as exc:
            log.error("cannot queue the removal of purged consumer offsets: %s", exc)
            for folder in folders:
                os.close(folder)
            raise
        return folders

    def _durable_replace(self, folder: int, name: str, offset: int) -> None:
        """On the offsets thread: write and fsync ``name``.tmp, rename it to ``name``, fsync
        the directory; closes ``folder``."""
        try:
            fd = os.open(name + _TMP, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644,
                         dir_fd=folder)
            try:
                self.io.pwrite(fd, _U64.pack(offset), 0)
                self.io.fsync_in_worker(fd)
            finally:
                os.close(fd)
            self.io.replace(name + _TMP, name, folder)
            self.io.fsync_in_worker(folder)
        finally:
            os.close(folder)

    def _durable_remove(self, folder: int, name: str) -> None:
        """On the offsets thread: remove ``name`` (if there), fsync the directory; closes
        ``folder``."""
        try:
            self.io.remove(name, folder)
            self.io.fsync_in_worker(folder)
        finally:
            os.close(folder)

    def _durable_remove_all(self, folders: list[int]) -> None:
        """On the offsets thread: empty each directory, fsync it; closes ``folders``."""
        try:
            for folder in folders:
                for name in os.listdir(folder):
                    self.io.remove(name, folder)
                self.io.fsync_in_worker(folder)
        finally:
            for folder in folders:
                os.close(folder)

    def _queue(self, key: tuple[str, int], value: int | None, job: Callable[[], None],
               apply: Callable[[], object]) -> asyncio.Future | None:
        """Run ``job`` on the offsets thread; a future that resolves after it, once
        ``apply`` brought memory to what the device has (unless ``clear`` ran meanwhile).
        ``value`` (None for a delete) is the key's value until then. With no event loop
        running (start-up), both run here and now, and None is returned (the job's OSError
        propagates)."""
        try:
            future = asyncio.get_running_loop().create_future()
        except RuntimeError:
            job()
            apply()
            return None
        generation = self._generation
        self._calls += 1
        call = self._calls
        self._pending[key] = (call, value)

        def done(error: OSError | None) -> None:
            if generation == self._generation:
                if error is None:
                    apply()
                if self._pending.get(key, (0,))[0] == call:
                    del self._pending[key]
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(IggyError(ErrorCode.CANNOT_WRITE_TO_FILE,
                                               f"consumer offset not stored: {error}"))

        self._writer.run(job, done)
        return future


def offset_dirs(partition_dir: str) -> list[str]:
    """The stored offsets' directories of the partition in ``partition_dir`` that exist."""
    dirs = [os.path.join(partition_dir, OFFSETS_DIR, kind) for kind in KINDS]
    return [directory for directory in dirs if os.path.isdir(directory)]


def remove_stored_offsets(partition_dir: str, io: IoBackend) -> None:
    """Remove every file in the stored offsets' directories of the partition in
    ``partition_dir`` (at open, before ``load``: a purge a crash interrupted). Raises
    OSError."""
    for directory in offset_dirs(partition_dir):
        for name in os.listdir(directory):
            io.remove(os.path.join(directory, name))


def _refusal(exc: OSError, code: int) -> IggyError:
    """The error of a store or delete that failed at once with ``exc`` (logged in one line,
    nothing changed in memory): CANNOT_WRITE_TO_FILE on a full disk, as every write, else
    ``code`` (as Iggy 0.8: CannotOpenConsumerOffsetsFile when the file cannot be opened)."""
    log.error("consumer offset not changed: %s", exc)
    return IggyError(ErrorCode.CANNOT_WRITE_TO_FILE if is_no_space(exc) else code,
                     f"consumer offset not changed: {exc}")


def _log_failed_removal(error: OSError | None) -> None:
    if error is not None:
        log.error("removing purged consumer offset files failed: %s", error)
