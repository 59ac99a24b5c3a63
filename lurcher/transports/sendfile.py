"""Zero-copy responses on plain TCP: stored message bytes go from the page cache to the
socket with ``os.sendfile`` instead of being read into Python and written back.

Used only when the transport's own write buffer is empty, so bytes cannot be reordered;
the moment the socket would block, the remainder (rest of the range and later parts) is
handed to the transport as ordinary buffers, which it sends when the socket drains.
"""

from __future__ import annotations

import os
from typing import Any

from lurcher.core.shard.reply import is_file_part

# Below this a read into memory and one write beat the extra sendfile system calls.
SENDFILE_MIN_BYTES = 64 * 1024


def worth_sendfile(parts: list[Any]) -> bool:
    """True when the response carries enough file bytes for sendfile to pay off."""
    return sum(p.total_bytes for p in parts if is_file_part(p)) >= SENDFILE_MIN_BYTES


def _send_range(sock_fd: int, r: Any) -> int:
    """Bytes of range ``r`` sent before the socket would block (all of it, usually)."""
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


def write_parts(transport: Any, sock_fd: int, parts: list[Any]) -> None:
    """Send ``parts`` in order: buffers through the transport, file slices with sendfile
    while the transport has nothing queued."""
    for index, part in enumerate(parts):
        if not is_file_part(part):
            transport.write(part)
            continue
        for r_index, r in enumerate(part.ranges):
            if transport.get_write_buffer_size():
                sent = 0
            else:
                sent = _send_range(sock_fd, r)
            if sent < r.length:
                transport.write(os.pread(r.fd, r.length - sent, r.position + sent))
                for rest in part.ranges[r_index + 1:]:
                    transport.write(os.pread(rest.fd, rest.length, rest.position))
                for later in parts[index + 1:]:
                    transport.write(later.read() if is_file_part(later) else later)
                return
