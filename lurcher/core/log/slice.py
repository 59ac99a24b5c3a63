"""The answer to a read: which messages, and where their bytes are in the segment files.

A ``PolledSlice`` never re-encodes messages: stored messages are already in wire form, so the
answer is a list of byte ranges of ``.log`` files. The transport may ``sendfile`` the ranges or
call ``read()`` to materialise them. Each range holds the ``FileHandle`` of its file, so its
``fd`` stays open (and is never reused for another file) while the range is alive, even if
the descriptor cache evicts the file or the segment is deleted meanwhile: keep the slice
until its bytes are sent.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lurcher.core.log.io import IoBackend, PosixIo

_POSIX = PosixIo()


class ByteRange(msgspec.Struct, frozen=True):
    """``length`` bytes at ``position`` of the segment log ``path`` (open as ``fd``, kept
    open by ``handle`` while this range lives)."""

    path: str
    fd: int
    position: int
    length: int
    handle: Any = None


class PolledSlice(msgspec.Struct, frozen=True):
    """Messages first_offset..last_offset (``count`` of them) as byte ranges, in order."""

    first_offset: int = 0
    count: int = 0
    last_offset: int = 0
    ranges: tuple[ByteRange, ...] = ()
    io: Any = None  # the partition's I/O backend (posix when None)

    @property
    def total_bytes(self) -> int:
        return sum(r.length for r in self.ranges)

    def read_into(self, into: memoryview, io: IoBackend | None = None) -> int:
        """Copy the bytes into ``into`` (at least ``total_bytes`` long); returns the count.

        Raises OSError, or EOFError when a file is shorter than its range.
        """
        io = io or self.io or _POSIX
        done = 0
        for r in self.ranges:
            got = io.preadinto(r.fd, into[done:done + r.length], r.position)
            if got != r.length:
                raise EOFError(f"{r.path}: {got} of {r.length} bytes at {r.position}")
            done += got
        return done

    def read(self, io: IoBackend | None = None) -> memoryview:
        """All the messages' bytes, back to back (one buffer, filled with pread)."""
        buf = memoryview(bytearray(self.total_bytes))
        self.read_into(buf, io)
        return buf

    def pieces(self) -> list[bytes]:
        """The messages' bytes as one ``bytes`` per range, each read by ``pread(2)`` into
        memory the read allocates: no zero-filled buffer first, which ``read`` needs (about
        60 us per MB less, measured with 16 replies alive). Always the posix call: the
        backends' reads fill buffers they are given. Raises OSError, or EOFError when a file
        is shorter than its range."""
        pieces = []
        for r in self.ranges:
            piece = _POSIX.pread(r.fd, r.length, r.position)
            if len(piece) != r.length:
                raise EOFError(f"{r.path}: {len(piece)} of {r.length} bytes at {r.position}")
            pieces.append(piece)
        return pieces

    def to_bytes(self, io: IoBackend | None = None) -> bytes:
        return bytes(self.read(io))


EMPTY = PolledSlice()
