"""An io_uring ``IoBackend`` (python ``liburing``): one submission per append.

``append_pair`` queues the log write, the index write and, when asked, an fsync of each,
linked so the index write starts only after the whole log write (the index entries are the
batch's commit record, see ``recovery``) and the fsyncs only after both writes, and submits
them with one system call. A short log write breaks the link (the index write completes
with ECANCELED): the rest of the log and then the index are written with ``pwrite``. Reads (``preadinto``/``pread``), single writes and fsyncs are single
submissions. Every call waits for its
completions before returning, so the durability contract is the posix one (data is in the
kernel when the call returns). A short write is finished with ``pwrite``.

``open_uring_io`` returns None (and logs why) where io_uring is missing or forbidden
(old kernels, seccomp in containers), so ``system.io = "auto"`` can fall back to posix.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Sequence

from lurcher.core.log.io import PosixIo
from lurcher.core.wire.buffer import Buffer

log = logging.getLogger(__name__)

IOSQE_IO_LINK = 1 << 2  # kernel ABI: link this SQE to the next one
RING_ENTRIES = 64


class UringIo(PosixIo):
    """``IoBackend`` whose writes, reads and fsyncs go through one io_uring."""

    def __init__(self, liburing, ring) -> None:
        self._lib = liburing
        self._ring = ring
        self._cqe = liburing.io_uring_cqe()

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

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        view = self._queue_write(fd, data, position, link=False)
        self._finish_write(fd, view, position, self._complete(1)[0])
        return len(view)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        return self.pwrite(fd, b"".join(buffers), position)

    def append_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, fsync: bool) -> None:
        """Write blob, then index entries (and fsync both, after them) in one submission."""
        log_view = self._queue_write(log_fd, blob, log_position, link=True)
        index_view = self._queue_write(index_fd, entries, index_position, link=fsync)
        if fsync:
            self._queue_fsync(log_fd, link=True)
            self._queue_fsync(index_fd, link=False)
        results = self._complete(4 if fsync else 2)
        self._finish_write(log_fd, log_view, log_position, results[0])
        if results[1] == -errno.ECANCELED:  # the short log write broke the chain
            super().append_pair(log_fd, b"", log_position, index_fd, index_view,
                                index_position, fsync)
            return
        self._finish_write(index_fd, index_view, index_position, results[1])
        for result in results[2:]:
            if result < 0:
                raise OSError(-result, os.strerror(-result))

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
        self._lib.io_uring_queue_exit(self._ring)


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
