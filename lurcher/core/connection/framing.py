"""Request framing, one implementation for every binary transport (TCP, TLS, WebSocket, QUIC).

``FrameReader`` is a sans-IO receive buffer: bytes go in through ``get_buffer`` /
``buffer_updated`` (the ``asyncio.BufferedProtocol`` shape) or ``feed`` (transports that
deliver messages), complete frames come out of ``next_frame``. Frame rules (wire §1.1):
``length`` counts the code and the payload; ``length < 4`` is answered with InvalidCommand and
reading goes on. Limits are applied here and nowhere else (``FrameLimits``, core.wire.frames):

- before login, a frame whose payload exceeds ``max_unauthenticated`` is answered with
  Unauthenticated and the connection is closed (nothing but a login fits there);
- after login, a payload above ``max_send`` (SendMessages) or ``max_control`` (any other
  command) is answered with InvalidCommand and the connection is closed.

A refusal that closes the connection is ``fatal``: the reader then yields nothing more.

Memory invariants: an idle connection holds ``INITIAL_BUFFER_BYTES``; the small-frame buffer
grows on demand (at most to what the pending bytes need, normally ``MAX_SMALL_BUFFER_BYTES``).
A frame too large for it is read into a dedicated buffer that grows as its bytes arrive
(doubling from ``BIG_FIRST_BYTES``), never beyond the announced size, so an announced length
costs at most ``BIG_FIRST_BYTES`` until the bytes are really sent. 4 MiB: a typical batch
(1,000 x 1 KB is about 1.06 MB) gets its exact-size buffer at once; growing from 1 MiB
copied each such batch once more and cost about 8% of pinned-producer throughput. Small frames
are views into the shared buffer, valid until the next ``get_buffer``/``feed`` or
``next_frame`` (which may compact the buffer), unless held (below); a big frame's
payload is its own buffer. Right after a big frame, while nothing else is pending, the next read
is offered only ``PEEK_AFTER_BIG_BYTES``: a producer's next batch is big too, and what a read
puts in the small buffer must be copied into the big one (a full small buffer, 256 KiB, cost
about 5% of the server's time at pinned-producer); the rest of the batch is read into its own
buffer.

Held frames: a frame whose reply is awaited keeps its payload until then (``hold`` ...
``release``). While a small one is held, the next ``get_buffer`` first moves the pending
bytes to a fresh buffer (``INITIAL_BUFFER_BYTES``, or what they need) and leaves the old one
to the payload's view, so input read meanwhile never lands where that payload lies; a big
frame's payload is its own buffer and needs nothing. (The connection stops reading after that
read, so a client that pipelines behind an awaited reply holds at most that second buffer
more, until the reply.)

Reuse: big-frame buffers come from ``BigBuffers``, the last few handed out in this thread
(one event loop), and one that nothing references any more (CPython reference count: the
batch, its views and the writes that held it are gone) is taken again for the next big frame
of its size, so producers sending equal batches do not pay for a fresh, page-faulting
allocation each time (about a tenth of the server's time at pinned-producer). A buffer still
referenced is never handed out; at most ``BIG_BUFFERS_KEPT`` are kept per thread.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.frames import FRAME_HEADER as REQUEST_HEADER
from lurcher.core.wire.frames import FRAME_HEADER_BYTES as HEADER_BYTES
from lurcher.core.wire.frames import FrameLimits

__all__ = ["REQUEST_HEADER", "HEADER_BYTES", "FrameLimits", "Frame", "BadFrame", "FrameReader"]
INITIAL_BUFFER_BYTES = 4 * 1024
MAX_SMALL_BUFFER_BYTES = 256 * 1024
MIN_ROOM_BYTES = 1024
BIG_FIRST_BYTES = 4 * 1024 * 1024
BIG_BUFFERS_KEPT = 8
PEEK_AFTER_BIG_BYTES = 4 * 1024


def _unreferenced_count() -> int:
    """What ``sys.getrefcount`` says, in ``BigBuffers.take``'s own code shape (held by a deque
    and a local), of a buffer nothing else references: 3 on CPython 3.11 (the deque, the
    local and the call's argument). Measured rather than assumed, since an interpreter that
    elides some reference counts (3.14 does) would otherwise see a referenced buffer as free."""
    recent = deque([bytearray(1)])
    for i in range(len(recent)):
        buffer = recent[i]
        return sys.getrefcount(buffer)
    raise AssertionError("unreachable")


_UNREFERENCED = _unreferenced_count()


class BigBuffers:
    """The last ``keep`` big-frame buffers handed out in one thread (see the module doc)."""

    def __init__(self, keep: int = BIG_BUFFERS_KEPT) -> None:
        self.keep = keep
        self.recent: deque[bytearray] = deque()

    def take(self, size: int) -> bytearray:
        """A ``size``-byte buffer nobody else references: a recent one, or a new one."""
        recent = self.recent
        for i in range(len(recent)):
            buffer = recent[i]
            if len(buffer) == size and sys.getrefcount(buffer) == _UNREFERENCED:
                del recent[i]
                break
        else:
            buffer = bytearray(size)
        recent.append(buffer)
        if len(recent) > self.keep:
            recent.popleft()
        return buffer


_PER_THREAD = threading.local()


def big_buffers() -> BigBuffers:
    """This thread's ``BigBuffers``."""
    pool = getattr(_PER_THREAD, "pool", None)
    if pool is None:
        pool = _PER_THREAD.pool = BigBuffers()
    return pool


@dataclass(frozen=True)
class Frame:
    code: int
    payload: memoryview


@dataclass(frozen=True)
class BadFrame:
    """A frame that is answered with ``status``; ``fatal`` closes the connection."""

    status: int
    fatal: bool
    detail: str


def _always() -> bool:
    return True


class FrameReader:
    def __init__(self, limits: FrameLimits, authenticated: Callable[[], bool] = _always,
                 initial_bytes: int = INITIAL_BUFFER_BYTES) -> None:
        self.limits = limits
        self.authenticated = authenticated
        self.buf = bytearray(initial_bytes)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.offered = 0          # size of the last small-buffer view handed out
        self.filled_all = False   # the last read filled that view: read more next time
        self.big: bytearray | None = None
        self.big_need = 0         # announced payload size of the big frame
        self.big_code = 0
        self.big_filled = 0
        self.failed = False       # a fatal refusal was returned: nothing more is read
        self.after_big = False    # the last frame was big: peek at the next one first
        self.lent = False         # the last frame returned is a view into ``buf``
        self.held = False         # ... and it is held: ``buf`` must not be written

    # -- receiving --------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self.big is not None and self.big_filled < self.big_need:
            return self._big_room()
        if self.held:
            self._detach()
        self._make_room()
        if self.after_big and self.start == self.end:
            self.offered = min(len(self.buf) - self.end, PEEK_AFTER_BIG_BYTES)
            return self.view[self.end:self.end + self.offered]
        self.offered = len(self.buf) - self.end
        return self.view[self.end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.failed:
            return
        if self.big is not None and self.big_filled < self.big_need:
            self.big_filled += nbytes
        else:
            self.end += nbytes
            self.filled_all = nbytes == self.offered

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Push bytes (for transports that deliver messages, e.g. WebSocket, QUIC)."""
        data = memoryview(data)
        while data and not self.failed:
            target = self.get_buffer()
            n = min(len(target), len(data))
            target[:n] = data[:n]
            self.buffer_updated(n)
            data = data[n:]

    def has_pending(self) -> bool:
        """Bytes were received that no returned frame holds (a frame begun counts)."""
        return self.end > self.start or self.big is not None

    def hold(self) -> None:
        """The frame last returned stays in use until ``release`` (module doc)."""
        self.held = self.lent

    def release(self) -> None:
        self.held = False

    def _detach(self) -> None:
        """Leave ``buf`` to the held frame's payload: pending bytes go to a fresh buffer."""
        pending = self.end - self.start
        fresh = bytearray(max(INITIAL_BUFFER_BYTES, pending + MIN_ROOM_BYTES))
        fresh[:pending] = self.view[self.start:self.end]
        self.buf, self.view = fresh, memoryview(fresh)
        self.start, self.end = 0, pending
        self.held = self.filled_all = False  # a full last read grows the old buffer only

    def _big_room(self) -> memoryview:
        """Free space of the big frame's buffer, grown (doubling) once it is full."""
        if self.big_filled == len(self.big):
            grown = bytearray(min(self.big_need, 2 * len(self.big)))
            grown[:self.big_filled] = self.big
            self.big = grown
        return memoryview(self.big)[self.big_filled:]

    def _make_room(self, want: int = MIN_ROOM_BYTES) -> None:
        """At least ``want`` free bytes after ``end``: compact, then grow when needed.
        A buffer that the last read filled completely doubles (up to the small maximum)."""
        size = len(self.buf)
        grow = self.filled_all and size < MAX_SMALL_BUFFER_BYTES
        self.filled_all = False
        if not grow and size - self.end >= want:
            return
        pending = self.end - self.start
        new_size = 2 * size if grow else size
        while new_size < pending + want:
            new_size *= 2
        if new_size > size:
            grown = bytearray(new_size)
            grown[:pending] = self.buf[self.start:self.end]
            self.buf, self.view = grown, memoryview(grown)
        elif self.start:
            self.buf[:pending] = self.buf[self.start:self.end]
        self.start, self.end = 0, pending

    @property
    def unhandled(self) -> bytes:
        """Bytes received but not yet returned as frames (for socket migration)."""
        small = bytes(self.buf[self.start:self.end])
        if self.big is not None:
            header = REQUEST_HEADER.pack(self.big_need + 4, self.big_code)
            return header + bytes(self.big[:self.big_filled]) + small
        return small

    # -- framing ----------------------------------------------------------------
    def next_frame(self) -> Frame | BadFrame | None:
        """The next complete frame, a frame to refuse, or None if more bytes are needed.

        A returned small frame's payload is a view valid until the next ``get_buffer`` or
        ``next_frame``, or, once held, until ``release``.
        """
        if self.failed:
            return None
        if self.big is not None:
            return self._take_big()
        if self.end - self.start < HEADER_BYTES:
            return None
        length, code = REQUEST_HEADER.unpack_from(self.buf, self.start)
        if length < 4:
            self.start += HEADER_BYTES
            return BadFrame(ErrorCode.INVALID_COMMAND, False, f"frame length {length} < 4")
        payload_bytes = length - 4
        limit, status = self.limits.for_code(code, self.authenticated())
        if payload_bytes > limit:
            self.failed = True
            return BadFrame(status, True,
                            f"payload of {payload_bytes} bytes exceeds {limit} for code {code}")
        frame_end = self.start + HEADER_BYTES + payload_bytes
        if frame_end <= self.end:
            payload = self.view[self.start + HEADER_BYTES:frame_end]
            self.start = frame_end
            if self.start == self.end:
                self.start = self.end = 0
            self.after_big = False
            self.lent = True
            return Frame(code, payload)
        if HEADER_BYTES + payload_bytes > MAX_SMALL_BUFFER_BYTES // 2:
            self._start_big(code, payload_bytes)
        else:
            self._make_room(frame_end - self.end)
        return None

    def _take_big(self) -> Frame | None:
        if self.big_filled < self.big_need:
            return None
        frame = Frame(self.big_code, memoryview(self.big))
        self.big = None
        self.after_big = True
        self.lent = False
        return frame

    def _start_big(self, code: int, payload_bytes: int) -> None:
        """Move the started frame's payload into its own buffer; later bytes stay here."""
        body = self.start + HEADER_BYTES
        have = min(self.end - body, payload_bytes)
        self.big = big_buffers().take(min(payload_bytes, max(BIG_FIRST_BYTES, have)))
        self.big[:have] = self.buf[body:body + have]
        self.big_code, self.big_need, self.big_filled = code, payload_bytes, have
        self.start = body + have
        if self.start == self.end:
            self.start = self.end = 0
