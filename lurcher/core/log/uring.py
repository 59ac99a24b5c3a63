"""An io_uring ``IoBackend`` (python ``liburing``).

Synchronous page-cache writes (``pwrite``, ``pwritev``, ``append_pair`` without fsync) are
the plain system calls of ``PosixIo``: on a file system without non-blocking buffered writes
(ext4) the ring hands each one to an io-wq worker thread and the caller waits about 60 us
for a copy of a few microseconds. ``append_pair`` with fsync queues the log write, the index
write and an fsync of each, linked so the index write starts only after the whole log write
(the index entries are the batch's commit record, see ``recovery``) and the fsyncs only
after both writes, and submits them with one system call. A short log write breaks the link
(the index write completes with ECANCELED): the rest of the log and then the index are
written with ``pwrite``. Reads (``preadinto``/``pread``) and fsyncs are single submissions.
Every call waits for its completions before returning, so the durability contract is the
posix one (data is in the kernel when the call returns).

``submit_pair`` is the completion-based form (the send path): the linked writes go to a
second ring whose eventfd is registered with the event loop (``loop.add_reader``), so the
call returns at once and ``done`` runs from the loop when both completions are in (with a
``reserve`` or ``writeback``, linked steps after them: the reservation, the start of both
files' writeback; their outcomes are ignored). With ``writeback`` a log write of at least
512 KiB goes in two pieces with the first one's writeback started between them
(``writeback_cut``), so the device works while the second is copied. That ring
belongs to the event loop thread (it is never waited on); the first ring keeps the
synchronous calls. A short or failed write is finished or reported there; finishing a short
write (rare: the kernel writes whole buffers to regular files) uses a blocking ``pwrite``.

With ``ordered_pairs`` (O_DIRECT segment files, see ``direct``) the log write of each pair
carries IOSQE_IO_DRAIN, so a pair starts only once every earlier submission completed.

A pair's entries are queued only when the submission queue has room for all of them (else
``submit_pair`` raises OSError with nothing queued: the batch fails, nothing was written).
Once queued, they are the kernel's to take: ``io_uring_submit`` publishes them before it
enters the kernel, so a failed enter (EBUSY, EAGAIN, EINTR) leaves them to the next one. So a
failed submit never fails the pair; the ring submits again shortly (``_submit``), and the
pair completes like any other.

``open_uring_io`` returns None (and logs why) where io_uring is missing or forbidden
(old kernels, seccomp in containers), so ``system.io = "auto"`` can fall back to posix.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from typing import Any

from lurcher.core.log.io import (
    FALLOC_FL_KEEP_SIZE,
    SYNC_FILE_RANGE_WRITE,
    Done,
    PosixIo,
    Reserve,
    writeback_cut,
)
from lurcher.core.wire.buffer import Buffer

log = logging.getLogger(__name__)

IOSQE_IO_DRAIN = 1 << 1  # kernel ABI: start only after every earlier SQE completed
IOSQE_IO_LINK = 1 << 2  # kernel ABI: link this SQE to the next one
IOSQE_IO_HARDLINK = 1 << 3  # kernel ABI: link, and run the next one even if this one fails
STEP_BITS, STEP_MASK = 3, 7  # a completion's user_data: pair number << 3 | step (0-6)
RING_ENTRIES = 64
ASYNC_RING_ENTRIES = 256
SUBMIT_RETRY_S = 0.001


class UringIo(PosixIo):
    """``IoBackend`` whose writes, reads and fsyncs go through one io_uring.

    ``ordered_pairs``: each ``submit_pair`` starts only after every earlier one completed
    (set by ``direct.DirectIo``, whose consecutive writes share a block)."""

    ordered_pairs = False

    def __init__(self, liburing, ring) -> None:
        self._lib = liburing
        self._ring = ring
        self._cqe = liburing.io_uring_cqe()
        self._async: CompletionRing | None = None

    def _queue_write(self, fd: int, data: Buffer, position: int, link: bool):
        sqe = self._lib.io_uring_get_sqe(self._ring)
        view = data if isinstance(data, (bytes, bytearray)) else memoryview(data).cast("B")
        self._lib.io_uring_prep_write(sqe, fd, view, len(view), position)
        if link:
            self._lib.io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK)
        return view

    def _queue_fsync(self, fd: int, link: bool) -> None:
        sqe = self._lib.io_uring_get_sqe(self._ring)
        self._lib.io_uring_prep_fsync(sqe, fd, 0)
        if link:
            self._lib.io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK)

    def _complete(self, count: int) -> list[int]:
        """Submit, wait for ``count`` completions, return their results in order."""
        lib, ring, cqe = self._lib, self._ring, self._cqe
        lib.io_uring_submit_and_wait(ring, count)
        results = []
        for _ in range(count):
            lib.io_uring_wait_cqe(ring, cqe)
            results.append(cqe.res)
            lib.io_uring_cqe_seen(ring, cqe)
        return results

    def _finish_write(self, fd: int, view, position: int, result: int) -> None:
        if result < 0:
            raise OSError(-result, os.strerror(-result))
        if result < len(view):
            super().pwrite(fd, memoryview(view)[result:], position + result)

    def append_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, fsync: bool) -> None:
        """Write blob, then index entries; with ``fsync``, all four steps (and fsync of
        both, after them) in one submission."""
        if not fsync:
            super().append_pair(log_fd, blob, log_position, index_fd, entries, index_position,
                                False)
            return
        log_view = self._queue_write(log_fd, blob, log_position, link=True)
        index_view = self._queue_write(index_fd, entries, index_position, link=True)
        self._queue_fsync(log_fd, link=True)
        self._queue_fsync(index_fd, link=False)
        results = self._complete(4)
        self._finish_write(log_fd, log_view, log_position, results[0])
        if results[1] == -errno.ECANCELED:  # the short log write broke the chain
            super().append_pair(log_fd, b"", log_position, index_fd, index_view,
                                index_position, fsync)
            return
        self._finish_write(index_fd, index_view, index_position, results[1])
        for result in results[2:]:
            if result < 0:
                raise OSError(-result, os.strerror(-result))

    def submit_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, done: Done,
                    reserve: Reserve = None, writeback: bool = False) -> None:
        """Queue the linked log and index writes (and ``reserve``, ``writeback``) on the
        completion ring and return; ``done`` runs on the event loop once all completed.
        Raises OSError (ring setup)."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async.loop is not loop:
            if self._async is not None:
                self._async.close()
            self._async = CompletionRing(self._lib, loop)
            self._async.ordered = self.ordered_pairs
        self._async.submit_pair(log_fd, blob, log_position, index_fd, entries, index_position,
                                done, reserve, writeback)

    def preadinto(self, fd: int, into: memoryview, position: int) -> int:
        """Fill ``into`` from ``position`` with io_uring reads; short only at end of file."""
        done = 0
        while done < len(into):
            sqe = self._lib.io_uring_get_sqe(self._ring)
            self._lib.io_uring_prep_read(sqe, fd, into[done:], len(into) - done, position + done)
            result = self._complete(1)[0]
            if result < 0:
                raise OSError(-result, os.strerror(-result))
            if result == 0:
                break
            done += result
        return done

    def pread(self, fd: int, length: int, position: int) -> bytes:
        buf = bytearray(length)
        got = self.preadinto(fd, memoryview(buf), position)
        return bytes(buf[:got])

    def fsync(self, fd: int) -> None:
        self._queue_fsync(fd, link=False)
        result = self._complete(1)[0]
        if result < 0:
            raise OSError(-result, os.strerror(-result))

    def close_ring(self) -> None:
        if self._async is not None:
            self._async.close()
            self._async = None
        self._lib.io_uring_queue_exit(self._ring)


class _PairWrite:
    """One submitted batch: its buffers (kept alive until every completion) and results,
    one per step of its chain: the write pieces (``pieces``: fd, view, position, step, in
    file order: the log's one or two, then the index) and the steps between and after them
    (writeback starts, the reservation: outcomes ignored)."""

    __slots__ = ("pieces", "done", "results")

    def __init__(self, pieces: list[tuple[int, Any, int, int]], done: Done,
                 steps: int) -> None:
        self.pieces = pieces
        self.done = done
        self.results: list[int | None] = [None] * steps

    def finish(self) -> OSError | None:
        """The outcome once every result is in (the writes' count); finishes short writes
        with ``pwrite``, in order: a piece cancelled because a short one broke the link
        before it (ECANCELED: it wrote nothing) is written whole."""
        try:
            for fd, view, position, step in self.pieces:
                result = self.results[step]
                _finish(fd, view, position, 0 if result == -errno.ECANCELED else result)
        except OSError as exc:
            return exc
        return None


def _report(write: _PairWrite) -> None:
    """Call ``done``; a failing callback is logged so the other completions still go out."""
    try:
        write.done(write.finish())
    except Exception:
        log.exception("io_uring completion callback failed")


def _finish(fd: int, view: Any, position: int, result: int) -> None:
    if result < 0:
        raise OSError(-result, os.strerror(-result))
    if result < len(view):
        PosixIo().pwrite(fd, memoryview(view)[result:], position + result)


class CompletionRing:
    """An io_uring owned by one event loop: submissions return at once, the ring's eventfd
    wakes the loop, completions are matched to their batch by ``user_data``."""

    def __init__(self, liburing: Any, loop: asyncio.AbstractEventLoop) -> None:
        """Raises OSError when the ring or the eventfd cannot be set up."""
        self._lib = liburing
        self.loop = loop
        self._ring = liburing.io_uring()
        liburing.io_uring_queue_init(ASYNC_RING_ENTRIES, self._ring, 0)
        self._cqe = liburing.io_uring_cqe()
        self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        liburing.io_uring_register_eventfd(self._ring, self._eventfd)
        self._pending: dict[int, _PairWrite] = {}
        self._next_id = 0
        self._retry: asyncio.TimerHandle | None = None
        self._failing = False  # the last submit failed (logged once per streak)
        self.ordered = False  # drain: a pair starts after every earlier one completed
        loop.add_reader(self._eventfd, self._reap)

    def submit_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, done: Done,
                    reserve: Reserve = None, writeback: bool = False) -> None:
        lib = self._lib
        log_view, index_view = _byte_view(blob), _byte_view(entries)
        cut = writeback_cut(log_position, len(log_view)) if writeback else 0
        chain: list[tuple[Any, tuple]] = []  # (prepare, its arguments) per step, in order
        pieces = []
        for start, end in ((0, cut), (cut, len(log_view))) if cut else ((0, len(log_view)),):
            if start:  # the first piece's writeback runs while the second is copied
                chain.append((lib.io_uring_prep_sync_file_range,
                              (log_fd, start, log_position, SYNC_FILE_RANGE_WRITE)))
            piece = memoryview(log_view)[start:end] if cut else log_view
            pieces.append((log_fd, piece, log_position + start, len(chain)))
            chain.append((lib.io_uring_prep_write, (log_fd, piece, len(piece),
                                                    log_position + start)))
        pieces.append((index_fd, index_view, index_position, len(chain)))
        chain.append((lib.io_uring_prep_write, (index_fd, index_view, len(index_view),
                                                index_position)))
        if reserve is not None:
            chain.append((lib.io_uring_prep_fallocate,
                          (log_fd, reserve[1], reserve[0], FALLOC_FL_KEEP_SIZE)))
        if writeback:
            chain += [(lib.io_uring_prep_sync_file_range, (fd, 0, 0, SYNC_FILE_RANGE_WRITE))
                      for fd in (log_fd, index_fd)]
        self._make_room(len(chain))
        self._next_id += 1
        self._pending[self._next_id] = _PairWrite(pieces, done, len(chain))
        self._queue_chain(chain, self._next_id << STEP_BITS, {step for *_, step in pieces})
        self._submit()

    def _queue_chain(self, chain: list[tuple[Any, tuple]], token: int,
                     writes: set[int]) -> None:
        """Queue a pair's steps linked in order: a failed or short write cancels the rest
        (``finish`` completes them); any other step's failure does not (hard link). With
        ``ordered``, the chain starts after every earlier submission completed."""
        lib = self._lib
        for step, (prepare, arguments) in enumerate(chain):
            sqe = self._sqe()
            prepare(sqe, *arguments)
            lib.io_uring_sqe_set_data64(sqe, token | step)
            flags = IOSQE_IO_DRAIN if self.ordered and step == 0 else 0
            if step < len(chain) - 1:
                flags |= IOSQE_IO_LINK if step in writes else IOSQE_IO_HARDLINK
            if flags:
                lib.io_uring_sqe_set_flags(sqe, flags)

    def _make_room(self, entries: int) -> None:
        """Room for ``entries`` queued entries, or OSError (EBUSY) with nothing queued."""
        lib, ring = self._lib, self._ring
        if lib.io_uring_sq_space_left(ring) >= entries:
            return
        self._submit()
        if lib.io_uring_sq_space_left(ring) < entries:
            raise OSError(errno.EBUSY, "io_uring submission queue full")

    def _submit(self) -> None:
        """Hand the queued entries to the kernel; on failure try again soon (module doc)."""
        try:
            self._lib.io_uring_submit(self._ring)
        except OSError as exc:
            if not self._failing:
                log.warning("io_uring submission failed (%s); retrying until it succeeds", exc)
            self._failing = True
            if self._retry is None:
                self._retry = self.loop.call_later(SUBMIT_RETRY_S, self._submit_again)
        else:
            self._failing = False
            self._retry_cancel()

    def _submit_again(self) -> None:
        self._retry = None
        self._submit()

    def _retry_cancel(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    def _sqe(self) -> Any:
        """A free submission entry (``_make_room`` made sure there is one)."""
        sqe = self._lib.io_uring_get_sqe(self._ring)
        if not sqe:  # the binding returns an entry wrapping NULL when the queue is full
            raise RuntimeError("io_uring submission queue full after _make_room")
        return sqe

    def _reap(self) -> None:
        """Drain every completion; call ``done`` of each batch whose steps all finished."""
        try:
            os.eventfd_read(self._eventfd)
        except BlockingIOError:
            pass
        lib, ring, cqe = self._lib, self._ring, self._cqe
        while lib.io_uring_peek_cqe(ring, cqe) == 0:
            token, result = lib.io_uring_cqe_get_data64(cqe), cqe.res
            lib.io_uring_cqe_seen(ring, cqe)
            write = self._pending.get(token >> STEP_BITS)
            if write is None:
                continue
            write.results[token & STEP_MASK] = result
            if None not in write.results:
                del self._pending[token >> STEP_BITS]
                _report(write)

    def close(self) -> None:
        """Stop watching the eventfd and release the ring (pending batches are dropped)."""
        self._retry_cancel()
        if not self.loop.is_closed():
            self.loop.remove_reader(self._eventfd)
        self._lib.io_uring_queue_exit(self._ring)
        os.close(self._eventfd)
        self._pending.clear()


def _byte_view(data: Buffer) -> Any:
    return data if isinstance(data, (bytes, bytearray)) else memoryview(data).cast("B")


def open_uring_io() -> UringIo | None:
    """An io_uring backend, or None with a log line saying why it is unavailable."""
    try:
        import liburing
    except Exception as exc:  # missing package or a wheel this CPU cannot run
        log.info("io_uring unavailable (liburing not importable: %s; it comes with "
                 "pip install 'lurcher[uring]'); using posix I/O", exc)
        return None
    ring = liburing.io_uring()
    try:
        liburing.io_uring_queue_init(RING_ENTRIES, ring, 0)
    except OSError as exc:
        log.info("io_uring unavailable (%s); using posix I/O", exc)
        return None
    return UringIo(liburing, ring)
