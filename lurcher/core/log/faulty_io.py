"""A fault-injecting ``IoBackend`` wrapper for storage-fault tests, off unless an environment
variable asks for it.

``TEST_LURCHER_IO_FAULT=<kind>@<n>`` wraps the selected backend (posix or io_uring) so that
the ``n``-th call (1-based, counted per shard process) of one kind fails once:

- ``write-eio@n``: the n-th batch write (``append_pair`` or ``submit_pair``) fails with EIO
  before writing anything.
- ``short-write@n``: the n-th batch write puts the first half of the messages into the log
  (through the wrapped backend, so the bytes really are in the file) and then raises EIO, as
  a device that fails part-way does. ``submit_pair`` reports these errors through ``done``,
  on a later turn of the event loop, as a real completion would.
- ``fsync-eio@n``: the n-th fsync (``fsync`` or ``fsync_in_worker``, any file) raises EIO
  without syncing. With group commit and one partition a send costs two fsyncs (log, index),
  so send k's first fsync is number 2k - 1.
- ``fsync-slow@n``: the n-th fsync logs ``SLOWED_FSYNC`` (so a test knows it began), sleeps
  ``SLOW_S`` (a device slow to flush), then fsyncs.
- ``remove-eio@n``: the n-th file removal (``remove``: a segment's log or index file, a
  consumer offset file) raises EIO and leaves the file in place, as a directory that refuses
  to let go of its entries does.
- ``remove-slow@n``: the n-th file removal logs ``SLOWED_REMOVAL`` (so a test knows it
  began), sleeps ``SLOW_S`` (a big file whose blocks take long to free), then removes the
  file.
- ``rename-eio@n``: the n-th rename (``replace``: a purge setting a segment file aside, a
  consumer offset file written) raises EIO and leaves both names as they were.
- ``rename-kill@n``: the process is killed (SIGKILL, a crash) at the n-th rename, before it
  is done: the renames before it are in the file system, nothing after it runs.
- ``dirsync-eio@n``: the n-th directory fsync (``sync_directory``, with ``enforce_fsync``: a
  purge's, a segment deletion's, a group-commit round's after a new segment) raises EIO
  without syncing.
- ``dirsync-slow@n``: the n-th directory fsync logs ``SLOWED_DIRSYNC`` (so a test knows it
  began), sleeps ``SLOW_S``, logs ``SLOWED_DIRSYNC_OVER`` (so a test knows whether something
  happened during it), then fsyncs.

Removals and renames of consumer offset files count too, those the offsets thread makes
with ``enforce_fsync`` included.

Every other call goes to the wrapped backend unchanged. Unset (production), ``select_io``
returns the backend itself: no wrapper, no cost.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import time
from typing import Any

from lurcher.core.wire.buffer import Buffer

IO_FAULT_ENV = "TEST_LURCHER_IO_FAULT"
FAULT_KINDS = ("write-eio", "short-write", "fsync-eio", "remove-eio",
               "rename-eio", "rename-kill", "dirsync-eio", "remove-slow", "fsync-slow",
               "dirsync-slow")
SLOW_S = 3.0
SLOWED_FSYNC = "injected: a slow fsync"
SLOWED_DIRSYNC = "injected: a slow directory fsync"
SLOWED_DIRSYNC_OVER = "injected: the slow directory fsync is over"
SLOWED_REMOVAL = "injected: a slow removal"

log = logging.getLogger(__name__)


def _eio(what: str) -> OSError:
    return OSError(errno.EIO, f"{os.strerror(errno.EIO)} (injected: {what})")


class FaultyIo:
    """Delegates to ``inner``; fails the ``at``-th write, fsync, removal, rename or directory
    fsync as ``kind`` says, once (a ``rename-kill`` kills the process)."""

    def __init__(self, inner: Any, kind: str, at: int) -> None:
        if kind not in FAULT_KINDS or at < 1:
            raise ValueError(f"{IO_FAULT_ENV}: want <{'|'.join(FAULT_KINDS)}>@<n >= 1>, "
                             f"got {kind}@{at}")
        self.inner, self.kind, self.at = inner, kind, at
        self.writes = 0
        self.fsyncs = 0
        self.removals = 0
        self.renames = 0
        self.dir_syncs = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _write_fault(self, log_fd: int, blob: Buffer, log_position: int) -> OSError | None:
        """Count a batch write; the injected error when this one fails (a short write has
        put the first half of the messages into the log by then)."""
        self.writes += 1
        if self.kind not in ("write-eio", "short-write") or self.writes != self.at:
            return None
        if self.kind == "short-write":
            view = memoryview(blob).cast("B")
            self.inner.pwrite(log_fd, view[:len(view) // 2], log_position)
        return _eio(f"{self.kind} #{self.writes}")

    def append_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, fsync: bool) -> None:
        error = self._write_fault(log_fd, blob, log_position)
        if error is not None:
            raise error
        if fsync:
            self.inner.append_pair(log_fd, blob, log_position, index_fd, entries,
                                   index_position, False)
            self.fsync(log_fd)
            self.fsync(index_fd)
            return
        self.inner.append_pair(log_fd, blob, log_position, index_fd, entries, index_position,
                               False)

    def submit_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, done: Any,
                    reserve: Any = None, writeback: bool = False) -> None:
        error = self._write_fault(log_fd, blob, log_position)
        if error is not None:
            asyncio.get_running_loop().call_soon(done, error)
            return
        self.inner.submit_pair(log_fd, blob, log_position, index_fd, entries, index_position,
                               done, reserve, writeback)

    def _fsync_fault(self) -> None:
        self.fsyncs += 1
        if self.fsyncs != self.at:
            return
        if self.kind == "fsync-eio":
            raise _eio(f"fsync #{self.fsyncs}")
        if self.kind == "fsync-slow":
            log.warning("%s (#%d, %.0f s)", SLOWED_FSYNC, self.fsyncs, SLOW_S)
            time.sleep(SLOW_S)

    def fsync(self, fd: int) -> None:
        self._fsync_fault()
        self.inner.fsync(fd)

    def fsync_in_worker(self, fd: int) -> None:
        self._fsync_fault()
        self.inner.fsync_in_worker(fd)

    def remove(self, path: str, folder: int | None = None) -> None:
        self.removals += 1
        if self.kind == "remove-eio" and self.removals == self.at:
            raise _eio(f"remove #{self.removals} of {path}")
        if self.kind == "remove-slow" and self.removals == self.at:
            log.warning("%s (#%d, %.0f s)", SLOWED_REMOVAL, self.removals, SLOW_S)
            time.sleep(SLOW_S)
        self.inner.remove(path, folder)

    def replace(self, src: str, dst: str, folder: int | None = None) -> None:
        self.renames += 1
        if self.renames == self.at and self.kind == "rename-kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "rename-eio" and self.renames == self.at:
            raise _eio(f"rename #{self.renames} of {src}")
        self.inner.replace(src, dst, folder)

    def sync_directory(self, path: str) -> None:
        self.dir_syncs += 1
        if self.kind == "dirsync-eio" and self.dir_syncs == self.at:
            raise _eio(f"directory fsync #{self.dir_syncs} of {path}")
        if self.kind == "dirsync-slow" and self.dir_syncs == self.at:
            log.warning("%s (#%d of %s, %.0f s)", SLOWED_DIRSYNC, self.dir_syncs, path, SLOW_S)
            time.sleep(SLOW_S)
            log.warning("%s (#%d)", SLOWED_DIRSYNC_OVER, self.dir_syncs)
        self.inner.sync_directory(path)


def wrap_for_faults(backend: Any) -> Any:
    """``backend`` wrapped per ``TEST_LURCHER_IO_FAULT``, or itself when that is unset."""
    spec = os.environ.get(IO_FAULT_ENV)
    if not spec:
        return backend
    kind, _, at = spec.partition("@")
    try:
        count = int(at)
    except ValueError:
        raise ValueError(f"{IO_FAULT_ENV}: want <kind>@<n>, got {spec!r}") from None
    return FaultyIo(backend, kind, count)
