"""The storage I/O backend: the only place the log touches file descriptors.

``IoBackend`` is deliberately small (open, positional write/read, fsync, truncate, size,
close, plus remove/replace for whole files and the fsync of a directory, plus a batch's
paired log and index write) so an
io_uring backend or a fault-injecting test backend (``faulty_io``, selected by
``TEST_LURCHER_IO_FAULT``) can replace ``PosixIo``. Every write is positional and complete:
``pwrite`` / ``pwritev`` loop until every byte is in the kernel or raise OSError.

``run_in_worker`` runs other blocking file work (a purge's removals: an unlink of a big
segment can take tens of milliseconds) the same way, so the event loop never waits for it.

``submit_pair`` is the asynchronous form of ``append_pair`` used by the send path: it
returns at once and later calls ``done(None)`` or ``done(OSError)`` on the event loop that
submitted it. ``PosixIo`` runs it on one dedicated writer thread per backend (so per shard):
writes run in submission order and the event loop never waits for the disk. The caller keeps
the buffers and the descriptors alive until ``done`` runs. Its ``reserve`` (position, length)
asks for disk blocks past the log's end after the writes (``reserve_space``: the file's size
does not change; a failure is ignored, the later write reports it), part of the same
submission so ``done`` means the reservation is finished too (see ``Segment.reservation``).
With ``writeback`` (``enforce_fsync``) the submission then starts both files' writeback
(``start_writeback``), so the device is already busy with the batch when the fsync that
acknowledges it comes; a long log write is cut in two (``writeback_cut``) and its first
piece's writeback starts before the second piece is written.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from lurcher.core.wire.buffer import Buffer

log = logging.getLogger(__name__)

Done = Callable[[OSError | None], None]
"""Completion callback of ``submit_pair``: None when every byte is written, else the error."""

Reserve = tuple[int, int] | None
"""Disk blocks to reserve in the log file after a ``submit_pair``: (position, length)."""


class IoBackend(Protocol):
    """File operations used by segments, partitions and offset files. All raise OSError.
    ``writes_to_page_cache``: ``append_pair`` without fsync only copies into the page cache
    (cheap enough for the event loop, see ``inline``); False for O_DIRECT."""

    writes_to_page_cache: bool

    def open(self, path: str, create: bool = True, mode: int = 0o644) -> int: ...
    def pwrite(self, fd: int, data: Buffer, position: int) -> int: ...
    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int: ...
    def pread(self, fd: int, length: int, position: int) -> bytes: ...
    def preadinto(self, fd: int, into: memoryview, position: int) -> int: ...
    def fsync(self, fd: int) -> None: ...
    def fsync_in_worker(self, fd: int) -> None: ...
    def start_writeback(self, fd: int) -> None: ...
    def truncate(self, fd: int, length: int) -> None: ...
    def size(self, fd: int) -> int: ...
    def close(self, fd: int) -> None: ...
    def remove(self, path: str, folder: int | None = None) -> None: ...
    def replace(self, src: str, dst: str, folder: int | None = None) -> None: ...
    def sync_directory(self, path: str) -> None: ...
    def run_in_worker(self, job: Callable[[], None], done: Done) -> None: ...
    def append_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, fsync: bool) -> None: ...
    def submit_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, done: Done,
                    reserve: Reserve = None, writeback: bool = False) -> None: ...


class WriterThread:
    """One daemon thread that runs blocking jobs in submission order and hands each result
    to the submitting event loop (``call_soon_threadsafe``). The queue holds at most what
    the callers keep in flight (each partition bounds its own in-flight batches)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def run(self, job: Callable[[], None], done: Done) -> None:
        """Queue ``job``; ``done(None | OSError)`` runs on the current event loop after it."""
        if self._thread is None:  # kept only once started: a failed start is tried again
            thread = threading.Thread(target=self._main, name=self._name, daemon=True)
            thread.start()
            self._thread = thread
        self._jobs.put((asyncio.get_running_loop(), job, done))

    def drain(self, timeout: float) -> bool:
        """Block until every job queued so far has run, at most ``timeout`` seconds; whether
        they all did. For shutdown, where the process may exit (and this daemon thread with
        it) once this returns; their completions go to the loop only if it still runs."""
        if self._thread is None:
            return True
        if not self._thread.is_alive():  # killed by a BaseException: nothing more runs
            return self._jobs.empty()
        reached = threading.Event()
        self._jobs.put((None, reached.set, None))
        return reached.wait(timeout)

    def _main(self) -> None:
        while True:
            loop, job, done = self._jobs.get()
            if loop is None:  # a ``drain`` mark
                job()
                continue
            try:
                job()
                error = None
            except OSError as exc:
                error = exc
            except Exception as exc:  # a bug in a job: fail it, keep serving the others
                log.exception("%s: job failed", self._name)
                error = OSError(errno.EIO, f"internal error in {self._name}: {exc!r}")
            try:
                loop.call_soon_threadsafe(done, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                log.debug("%s: completion for a closed event loop dropped", self._name)
            # dropped before waiting for the next job: what they hold (a batch's file
            # handles) is released now, not when an unrelated job comes
            loop = job = done = None


# The process's fsync thread: group-commit rounds (``lurcher.core.shard.commit``) and segment
# seals (``Partition.seal_async``) in one queue, so two fsyncs of one file never run at once:
# Linux reports a writeback error to one fsync of an open file only, and the partition must
# have failed its storage before a later round's success acknowledges anything.
FSYNC_THREAD = WriterThread("lurcher-fsync")


class PosixIo:
    """``IoBackend`` over os.pwrite/os.pwritev/os.pread/os.preadv; ``submit_pair`` on a
    writer thread."""

    _writer: WriterThread | None = None
    writes_to_page_cache = True

    def open(self, path: str, create: bool = True, mode: int = 0o644) -> int:
        """Open read-write (creating the file with ``mode`` when ``create``). Raises OSError."""
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        return os.open(path, flags, mode)

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        """Write all of ``data`` at ``position``; returns its length. Raises OSError."""
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        total = len(view)
        done = os.pwrite(fd, view, position)
        while done < total:
            done += os.pwrite(fd, memoryview(view)[done:], position + done)
        return total

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        """Write all ``buffers`` back to back at ``position``; returns the byte count."""
        total = sum(len(b) for b in buffers)
        done = os.pwritev(fd, buffers, position)
        if done < total:
            joined = memoryview(b"".join(buffers))
            while done < total:
                done += os.pwrite(fd, joined[done:], position + done)
        return total

    def pread(self, fd: int, length: int, position: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer only at end of file)."""
        chunks = []
        while length > 0:
            chunk = os.pread(fd, length, position)
            if not chunk:
                break
            chunks.append(chunk)
            length -= len(chunk)
            position += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def preadinto(self, fd: int, into: memoryview, position: int) -> int:
        """Fill ``into`` from ``position``; returns bytes read (short only at end of file)."""
        done = 0
        while done < len(into):
            n = os.preadv(fd, [into[done:]], position + done)
            if n == 0:
                break
            done += n
        return done

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fsync_in_worker(self, fd: int) -> None:
        """fsync from a worker thread (group commit): never touches state the event loop
        uses, such as an io_uring ring. Raises OSError."""
        os.fsync(fd)

    def start_writeback(self, fd: int) -> None:
        """Start writing the file's dirty pages to the device without waiting
        (``sync_file_range`` WRITE, which leaves the error report to the next ``fsync``);
        a worker thread's call, before fsyncing several files: their writes then go to the
        device together and one journal commit tends to cover them all. Never raises."""
        start_writeback_of(fd)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def close(self, fd: int) -> None:
        os.close(fd)

    def remove(self, path: str, folder: int | None = None) -> None:
        """Delete a file (``path`` relative to the directory descriptor ``folder`` when
        given); a missing file is not an error."""
        try:
            os.unlink(path, dir_fd=folder)
        except FileNotFoundError:
            pass

    def replace(self, src: str, dst: str, folder: int | None = None) -> None:
        """Rename ``src`` to ``dst`` atomically (both relative to ``folder`` when given)."""
        os.replace(src, dst, src_dir_fd=folder, dst_dir_fd=folder)

    def sync_directory(self, path: str) -> None:
        """``sync_directory``: safe on any thread (plain system calls). Raises OSError."""
        sync_directory(path)

    def append_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, fsync: bool) -> None:
        """Write a batch's messages and index entries; fsync both when ``fsync``."""
        self.pwrite(log_fd, blob, log_position)
        self.pwrite(index_fd, entries, index_position)
        if fsync:
            self.fsync(log_fd)
            self.fsync(index_fd)

    def run_in_worker(self, job: Callable[[], None], done: Done) -> None:
        """Run a blocking file job (a purge's removals) on the writer thread, after the
        writes submitted before it; ``done(None | OSError)`` on the event loop after it."""
        self._writer_thread().run(job, done)

    def _writer_thread(self) -> WriterThread:
        if self._writer is None:
            self._writer = WriterThread("lurcher-writer")
        return self._writer

    def submit_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, done: Done,
                    reserve: Reserve = None, writeback: bool = False) -> None:
        """``append_pair`` (no fsync) on the writer thread, then the log's ``reserve``
        (``reserve_space``, failures ignored) and with ``writeback`` ``start_writeback`` of
        both files; ``done`` on the event loop after all of it."""

        def job() -> None:
            view = memoryview(blob).cast("B")
            cut = writeback_cut(log_position, len(view)) if writeback else 0
            if cut:  # the first piece goes to the device while the second is copied
                PosixIo.pwrite(self, log_fd, view[:cut], log_position)
                start_writeback_of(log_fd, log_position, cut)
            PosixIo.append_pair(self, log_fd, view[cut:], log_position + cut, index_fd,
                                entries, index_position, False)
            if reserve is not None:
                reserve_space(log_fd, *reserve)
            if writeback:
                self.start_writeback(log_fd)
                self.start_writeback(index_fd)

        self._writer_thread().run(job, done)


def sync_directory(path: str | os.PathLike[str]) -> None:
    """fsync the directory ``path``: its entries (files created, renamed, removed) are on
    the device once this returns. The process's one way to do it (storage backends, the
    cluster's journal files). Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_no_space(exc: OSError) -> bool:
    """The write failed for lack of space (full disk, quota, file size limit)."""
    return exc.errno in NO_SPACE_ERRNOS


FALLOC_FL_KEEP_SIZE = 1  # linux/falloc.h


def libc_function(name: str, *argtypes: type) -> Callable[..., int] | None:
    """The C library's ``name`` (errno kept for ``ctypes.get_errno``), or None without it."""
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


_FALLOCATE = libc_function("fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                           ctypes.c_int64)
SYNC_FILE_RANGE = libc_function("sync_file_range", ctypes.c_int, ctypes.c_int64,
                                ctypes.c_int64, ctypes.c_uint)
SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h; WAIT_BEFORE = 1, WAIT_AFTER = 4

WRITEBACK_PIECE_BYTES = 256 * 1024
"""A log write of at least twice this with ``writeback`` is written in two pieces, the
first one's writeback started before the second is copied: the device works while the page
cache fills. Measured on this project's VM (ext4, 1 MiB log write and a 16 KB index write,
then fsync of both): 0.82-0.85 ms in two pieces against 0.94-0.98 in one; three or more
pieces measured slower than two."""

PAGE_BYTES = 4096


def writeback_cut(position: int, length: int) -> int:
    """Where (an offset into the write) a log write at ``position`` is cut in two, on a
    page boundary of the file near its middle, so its first piece's writeback can start
    early; 0 for a write too short to gain from it."""
    if length < 2 * WRITEBACK_PIECE_BYTES:
        return 0
    return ((position + length // 2) & ~(PAGE_BYTES - 1)) - position


def start_writeback_of(fd: int, position: int = 0, length: int = 0) -> None:
    """Start the writeback of ``length`` bytes of the file from ``position`` (0: to its end)
    without waiting (``sync_file_range`` WRITE); errors are left to the next fsync."""
    if SYNC_FILE_RANGE is not None:
        SYNC_FILE_RANGE(fd, position, length, SYNC_FILE_RANGE_WRITE)


def reserve_space(fd: int, position: int, length: int) -> bool | None:
    """Allocate ``length`` bytes at ``position`` without changing the file's size, so later
    writes there need no free space. True when reserved, False when the disk is full,
    None when the file system (or platform) cannot do it."""
    if _FALLOCATE is None:
        return None
    if _FALLOCATE(fd, FALLOC_FL_KEEP_SIZE, position, length) == 0:
        return True
    return False if ctypes.get_errno() in NO_SPACE_ERRNOS else None


IO_MODES = ("auto", "uring", "posix")


def select_io(mode: str, direct: bool = False) -> IoBackend:
    """The backend for ``system.io``: "posix", "uring" (raises OSError if unavailable) or
    "auto" (io_uring where it works, else posix, with a log line); with ``direct``
    (``system.segment.direct_io``) segment files are written O_DIRECT (``direct``)."""
    if mode not in IO_MODES:
        raise ValueError(f"system.io must be one of {IO_MODES}, got {mode!r}")
    from lurcher.core.log.direct import DirectIo
    from lurcher.core.log.faulty_io import wrap_for_faults
    backend: IoBackend | None = PosixIo() if mode == "posix" else None
    if backend is None:
        from lurcher.core.log.uring import open_uring_io
        backend = open_uring_io()
        if backend is None and mode == "uring":
            raise OSError("system.io = \"uring\" but io_uring is unavailable here (see the "
                          "log line above; set system.io = \"auto\" or \"posix\")")
    backend = backend or PosixIo()
    return wrap_for_faults(DirectIo(backend) if direct else backend)
