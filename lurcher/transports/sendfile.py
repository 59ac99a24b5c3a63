"""Responses of one stream connection (TCP, TLS), written in order with bounded memory.

``Outbox`` holds what a connection still has to send: buffers, and stored message bytes as
file ranges. On plain TCP a range goes from the page cache to the socket with ``os.sendfile``
while the transport has nothing queued; when the socket would block (or on TLS, where
sendfile cannot be used) the range is read in chunks of ``FILE_CHUNK_BYTES`` and handed to
the transport, and the outbox stops as soon as the transport asks the protocol to pause
writing (its buffer passed the high-water mark). It continues on ``resume_writing``.

Invariants: bytes leave in the order they were added; at most about one chunk plus the
transport's high-water mark is held in memory per connection, however large the replies or
however many are pipelined (the connection stops reading requests while paused); a range
waiting here holds its own duplicate of the file descriptor, so a segment closed or deleted
meanwhile is still read consistently and a reused descriptor number is never read. Ranges
are read with ``pread(2)``, whatever the storage backend (see ``lurcher.core.log.slice``).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from lurcher.core.shard.reply import is_file_part, read_parts

# Below this a read into memory and one write beat the extra sendfile system calls.
SENDFILE_MIN_BYTES = 64 * 1024
# Bytes read into memory at a time when sendfile cannot go on (socket full, TLS).
FILE_CHUNK_BYTES = 256 * 1024
# The transport's buffer above which it pauses us; 0 = resume only once it is empty.
WRITE_HIGH_WATER_BYTES = 64 * 1024
WRITE_LOW_WATER_BYTES = 0


class PendingRange:
    """``length`` bytes at ``position`` of the file open as ``fd`` (a duplicate we own)."""

    __slots__ = ("fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd, self.position, self.length = fd, position, length

    def advance(self, n: int) -> None:
        self.position += n
        self.length -= n


def _sendfile(sock_fd: int, r: PendingRange) -> int:
    """Bytes of ``r`` sent before the socket would block (all of it, usually)."""
    sent = 0
    while sent < r.length:
        try:
            n = os.sendfile(sock_fd, r.fd, r.position + sent, r.length - sent)
        except BlockingIOError:
            return sent
        if n == 0:
            return sent
        sent += n
    return sent


class Outbox:
    """Ordered response parts of one connection (see module docstring)."""

    def __init__(self, transport: Any, sock_fd: int | None) -> None:
        self.transport = transport
        self.sock_fd = sock_fd
        self.items: deque[Any] = deque()
        self.paused = False

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, parts: list[Any]) -> None:
        """Queue a response's parts and send what the socket takes: file parts under
        ``SENDFILE_MIN_BYTES`` are read first (``read_parts``: the reply is answered
        CANNOT_READ_FILE when they cannot be), the others are sent from the file. Raises
        OSError, EOFError (a file range cut short, found while sending it)."""
        for part in read_parts(parts, below=SENDFILE_MIN_BYTES):
            if is_file_part(part):
                self.items.extend(PendingRange(os.dup(r.fd), r.position, r.length)
                                  for r in part.ranges)
            else:
                self.items.append(part)
        self.pump()

    def pump(self) -> None:
        """Send queued items until done or the transport pauses us. Raises OSError,
        EOFError (a file shorter than its range)."""
        while self.items and not self.paused:
            item = self.items[0]
            if not isinstance(item, PendingRange):
                self._write_buffers()
                continue
            if self.sock_fd is not None and not self.transport.get_write_buffer_size():
                item.advance(_sendfile(self.sock_fd, item))
            if item.length:
                self._write_chunk(item)
            if not item.length:
                os.close(item.fd)
                self.items.popleft()

    def _write_buffers(self) -> None:
        """Hand the queued buffers up to the next file range to the transport in one call,
        so a reply's header and body leave in one system call (``writev``) and segment."""
        items, batch = self.items, []
        while items and not isinstance(items[0], PendingRange):
            batch.append(items.popleft())
        if len(batch) == 1:
            self.transport.write(batch[0])
        else:
            self.transport.writelines(batch)

    def _write_chunk(self, item: PendingRange) -> None:
        n = min(FILE_CHUNK_BYTES, item.length)
        data = os.pread(item.fd, n, item.position)
        if len(data) != n:
            raise EOFError(f"{n} bytes wanted at {item.position}, {len(data)} read")
        item.advance(n)
        self.transport.write(data)

    def clear(self) -> None:
        """Forget everything queued (the connection is closing)."""
        for item in self.items:
            if isinstance(item, PendingRange):
                os.close(item.fd)
        self.items.clear()
