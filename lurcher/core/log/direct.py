"""O_DIRECT segment files: block-aligned writes from pooled buffers, the partial tail block
kept in memory (``system.segment.direct_io``).

``DirectIo`` wraps another ``IoBackend`` (posix or io_uring) and changes one thing: the
writes to segment files (``.log``/``.index``, named by their 20-digit start offset) go
through a second descriptor opened with O_DIRECT, past the page cache. Nothing starts the
writeback of such files (neither a batch's submission with ``enforce_fsync``, the
``writeback`` of ``IoBackend.submit_pair``, nor ``start_writeback`` before a group-commit
fsync): a direct write leaves no dirty page, and on io_uring each such step is one more trip
through a kernel worker before the batch's completion. Everything else
(reads, sendfile of polls, fsync, truncate, other files) uses the ordinary descriptor the
caller holds, so ``IoBackend`` keeps its shape and polls still ``sendfile`` (which a
descriptor opened O_DIRECT cannot do). Reads after a direct write are coherent: the kernel
drops the cached pages a direct write covers.

O_DIRECT wants the file offset, the length and the memory address aligned to the logical
block (``BLOCK``, 4096: safe for every device). So each direct file (one state per inode,
shared by every descriptor open on it) keeps, in memory:

- ``end``: its logical length (what was written, without padding), and
- ``tail``: the bytes from the last block boundary at or before ``end`` up to ``end``
  (shorter than a block, empty when ``end`` is aligned).

A write at ``position`` (``end`` for every append) is laid out by ``lay_out`` into a buffer
from ``AlignedPool``: the kept tail, the new bytes, zeros up to the next boundary; it is
written at the tail's boundary, so the block holding the previous end is rewritten with the
same leading bytes (a torn rewrite leaves those bytes as they were) and the file on disk is
padded with zeros up to a block boundary. The padding is not data: recovery at start stops at
it (a zero index entry is not sound, a zero log header has the wrong offset or checksum) and
truncates the files to the real end, exactly as for a torn tail; ``size`` answers the logical
length meanwhile, and closing a file cuts its padding. ``truncate`` (a failed append cut back,
recovery) sets ``end`` and reads the new tail back from the file. A batch stays atomic across a
crash as before: its index entries (the commit record) are written after its log bytes.

In-memory state advances when a write is laid out (at submission), so batches in flight
are laid out one after the other; their direct writes overlap in the shared boundary block
and must land in order: the posix writer thread runs them in order, io_uring gets
``ordered_pairs`` (IOSQE_IO_DRAIN on each pair). A failed write is always followed by a
``truncate`` to the accepted state (``Segment.cut_back``), which resets the tail.

The pooled buffers are not registered as io_uring fixed buffers: the python ``liburing``
binding registers them (``io_uring_register_buffers_update_tag`` takes an mmap), but its
``io_uring_prep_write_fixed`` takes the data as ``char *`` converted from a ``bytes`` object
only, so it cannot point into a registered buffer; ``io_uring_prep_write`` takes any buffer.

Where O_DIRECT cannot be opened (EINVAL: tmpfs and other file systems without it) the
backend logs one line and writes through the page cache from then on.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import re
from collections.abc import Sequence
from typing import Any

from lurcher.core.log.io import Reserve
from lurcher.core.wire.buffer import Buffer

log = logging.getLogger(__name__)

BLOCK = 4096
_SEGMENT_FILE = re.compile(r"\d{20}\.(log|index)\Z")
_KEEP_PER_CLASS = 8


def align_down(n: int) -> int:
    return n - n % BLOCK


def align_up(n: int) -> int:
    return -(-n // BLOCK) * BLOCK


def is_segment_file(path: str) -> bool:
    return _SEGMENT_FILE.match(os.path.basename(path)) is not None


class AlignedPool:
    """Page-aligned buffers (anonymous mmap) in power-of-two size classes from one block
    up, reused: after warm-up an append allocates nothing. At most ``keep`` free buffers per
    class are kept; more in flight at once are allocated and dropped after use."""

    def __init__(self, keep: int = _KEEP_PER_CLASS) -> None:
        self.keep = keep
        self.allocated = 0
        self._free: dict[int, list[mmap.mmap]] = {}

    def acquire(self, size: int) -> mmap.mmap:
        size_class = max(BLOCK, 1 << (max(size, 1) - 1).bit_length())
        free = self._free.get(size_class)
        if free:
            return free.pop()
        self.allocated += 1
        return mmap.mmap(-1, size_class)

    def release(self, buffer: mmap.mmap) -> None:
        free = self._free.setdefault(len(buffer), [])
        if len(free) < self.keep:
            free.append(buffer)


class DirectFile:
    """One segment file's O_DIRECT descriptor and its in-memory ``end`` and ``tail``,
    shared by every descriptor open on that file (``users`` of them; ``inode`` names it)."""

    __slots__ = ("fd", "path", "inode", "users", "end", "tail")

    def __init__(self, fd: int, path: str, inode: tuple[int, int]) -> None:
        self.fd, self.path, self.inode = fd, path, inode
        self.users, self.end, self.tail = 1, 0, b""


def lay_out(buffer: Any, end: int, tail: bytes, position: int,
            data: Buffer) -> tuple[int, int, int, bytes]:
    """Fill ``buffer`` with the aligned window that writes ``data`` at ``position`` into a
    file whose content from ``end - len(tail)`` (a block boundary) to ``end`` is ``tail``.

    ``position`` must not be before that boundary; past ``end`` the gap is zeros. Returns
    (file offset of the window, its length: a multiple of BLOCK, the new end, the new
    tail). ``buffer`` must hold ``align_up(new end - window start)`` bytes."""
    start = end - len(tail)
    assert start % BLOCK == 0 and position >= start, (start, position)
    view = memoryview(data).cast("B")
    before = position - start
    after = before + len(view)
    new_end = max(end, position + len(view))
    total = new_end - start
    length = align_up(total)
    if before <= len(tail):
        buffer[:before] = tail[:before]
    else:
        buffer[:len(tail)] = tail
        buffer[len(tail):before] = bytes(before - len(tail))
    buffer[before:after] = view
    if after < len(tail):
        buffer[after:len(tail)] = tail[after:]
    buffer[total:length] = bytes(length - total)
    return start, length, new_end, bytes(buffer[align_down(total):total])


class DirectIo:
    """``IoBackend`` writing segment files with O_DIRECT through ``inner`` (module doc)."""

    writes_to_page_cache = False  # a write waits for the device: never on the event loop

    def __init__(self, inner: Any, pool: AlignedPool | None = None) -> None:
        self.inner = inner
        self.pool = pool or AlignedPool()
        self.enabled = True
        self._files: dict[int, DirectFile] = {}  # by the caller's descriptor
        self._by_inode: dict[tuple[int, int], DirectFile] = {}
        if hasattr(inner, "ordered_pairs"):
            inner.ordered_pairs = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- descriptors ---------------------------------------------------------------------

    def open(self, path: str, create: bool = True, mode: int = 0o644) -> int:
        """Open as ``inner`` does; a segment file also gets its O_DIRECT descriptor and
        state, or shares them with the descriptors already open on it (a file evicted from
        the descriptor cache and reopened while a write through the old one is in flight
        must not start again from what the disk shows)."""
        fd = self.inner.open(path, create, mode)
        if self.enabled and is_segment_file(path):
            info = os.fstat(fd)
            shared = self._by_inode.get((info.st_dev, info.st_ino))
            if shared is not None:
                shared.users += 1
                self._files[fd] = shared
                return fd
            try:
                direct = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_DIRECT)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    self.inner.close(fd)
                    raise
                self.enabled = False
                log.warning("O_DIRECT is not supported under %s (%s); segment files are "
                            "written through the page cache (system.segment.direct_io)",
                            os.path.dirname(path) or ".", exc)
                return fd
            state = DirectFile(direct, path, (info.st_dev, info.st_ino))
            self._files[fd] = self._by_inode[state.inode] = state
            self._reset(fd, state, info.st_size)
        return fd

    def close(self, fd: int) -> None:
        """Close ``fd``; with the file's last one, its O_DIRECT descriptor too, after
        cutting the block padding past the logical end."""
        state = self._files.pop(fd, None)
        state = state if state is not None and self._last_user(state) else None
        if state is not None:
            os.close(state.fd)
            try:
                if self.inner.size(fd) > state.end:
                    self.inner.truncate(fd, state.end)
            except OSError as exc:  # recovery cuts the padding at the next start
                log.warning("cannot cut the block padding of a segment file: %s", exc)
        self.inner.close(fd)

    def _last_user(self, state: DirectFile) -> bool:
        state.users -= 1
        if state.users:
            return False
        del self._by_inode[state.inode]
        return True

    def _reset(self, fd: int, state: DirectFile, end: int) -> None:
        """The file's logical length is ``end``: read its tail block back."""
        start = align_down(end)
        state.end = end
        state.tail = self.inner.pread(fd, end - start, start) if end > start else b""

    def logical_size(self, path: str) -> int | None:
        """The logical length of open direct file ``path`` (None when not open here); on
        disk it is followed by at most a block of zeros."""
        for state in self._files.values():
            if state.path == path:
                return state.end
        return None

    def size(self, fd: int) -> int:
        state = self._files.get(fd)
        return self.inner.size(fd) if state is None else state.end

    def truncate(self, fd: int, length: int) -> None:
        self.inner.truncate(fd, length)
        state = self._files.get(fd)
        if state is not None:
            self._reset(fd, state, length)

    # -- writes --------------------------------------------------------------------------

    def _lay_out(self, fd: int, data: Buffer, position: int) -> tuple[int, Any, int, Any]:
        """(direct fd, aligned view, file offset, pooled buffer) for writing ``data`` at
        ``position`` of direct file ``fd``; advances its end and tail."""
        state = self._files[fd]
        if position < state.end - len(state.tail):  # rewriting older blocks (not appends)
            start = align_down(position)
            state.tail = self.inner.pread(fd, state.end - start, start)
        need = align_up(max(state.end, position + len(memoryview(data).cast("B")))
                        - (state.end - len(state.tail)))
        buffer = self.pool.acquire(need)
        offset, length, state.end, state.tail = lay_out(buffer, state.end, state.tail,
                                                        position, data)
        return state.fd, memoryview(buffer)[:length], offset, buffer

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        if fd not in self._files:
            return self.inner.pwrite(fd, data, position)
        direct, view, offset, buffer = self._lay_out(fd, data, position)
        try:
            self.inner.pwrite(direct, view, offset)
        finally:
            view.release()
            self.pool.release(buffer)
        return len(memoryview(data).cast("B"))

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        if fd not in self._files:
            return self.inner.pwritev(fd, buffers, position)
        return self.pwrite(fd, b"".join(buffers), position)

    def _lay_out_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                      entries: Buffer, index_position: int) -> tuple[tuple, tuple] | None:
        """The inner pair call's six arguments and the two pooled writes to release after
        it; None when either file is not direct."""
        if log_fd not in self._files or index_fd not in self._files:
            return None
        log_w = self._lay_out(log_fd, blob, log_position)
        index_w = self._lay_out(index_fd, entries, index_position)
        return (log_w[0], log_w[1], log_w[2], index_w[0], index_w[1], index_w[2]), (log_w, index_w)

    def append_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, fsync: bool) -> None:
        laid = self._lay_out_pair(log_fd, blob, log_position, index_fd, entries, index_position)
        if laid is None:
            self.inner.append_pair(log_fd, blob, log_position, index_fd, entries,
                                   index_position, fsync)
            return
        try:
            self.inner.append_pair(*laid[0], fsync)
        finally:
            self._release(*laid[1])

    def submit_pair(self, log_fd: int, blob: Buffer, log_position: int, index_fd: int,
                    entries: Buffer, index_position: int, done: Any,
                    reserve: Reserve = None, writeback: bool = False) -> None:
        laid = self._lay_out_pair(log_fd, blob, log_position, index_fd, entries, index_position)
        if laid is None:
            self.inner.submit_pair(log_fd, blob, log_position, index_fd, entries,
                                   index_position, done, reserve, writeback)
            return

        def finished(error: OSError | None) -> None:
            self._release(*laid[1])
            done(error)

        try:  # no writeback to start: a direct write leaves no dirty page behind
            self.inner.submit_pair(*laid[0], finished, reserve, False)
        except OSError:
            self._release(*laid[1])
            raise

    def start_writeback(self, fd: int) -> None:
        """``inner``'s, except for a direct file: a direct write leaves no dirty page, so a
        group-commit round has nothing to start there either."""
        if fd not in self._files:
            self.inner.start_writeback(fd)

    def _release(self, *writes: tuple[int, Any, int, Any]) -> None:
        for _, view, _, buffer in writes:
            view.release()
            self.pool.release(buffer)
