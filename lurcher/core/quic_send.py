"""Stream data handed to aioquic without copying it (``HeldBytes``, ``StreamParts``).

Owns: the send buffer of an aioquic stream sender (``QuicStreamSender._buffer``, a
``bytearray`` in aioquic 1.7). aioquic copies every ``send_stream_data`` into that bytearray,
then copies each packet's share out of it twice (a bytearray slice, then ``bytes``), and
deletes acknowledged bytes from its front. A sender whose buffer is empty gets a
``HeldBytes`` instead (``LongFrameQuicConnection.send_stream_data``): the first write is
kept as the caller's own buffer, or buffers (a ``StreamParts``: a request's header, index
and messages are sent as one piece of stream data without being joined), each packet's
share is a view of the buffer it lies in (a share across buffers is copied, once) and
an acknowledgement only moves the start, letting go of buffers wholly acknowledged. A second
write to a non-empty ``HeldBytes`` turns it back into aioquic's ``bytearray`` (the bytes not
yet acknowledged are copied once), so every sequence of writes stays correct.

Invariants: a held buffer never changes while it is held. The server's replies are
``StreamParts`` too (the frame header, the poll header, one ``bytes`` per byte range of the
log read by ``pread``); ``StreamParts`` holds only contiguous buffers over ``bytes``
(immutable) and copies any other, so a caller that reuses its own buffer after a request
cannot change what a retransmission sends. The sender touches its buffer only by ``+=``,
slicing, ``del [:n]`` and ``len`` (aioquic 1.7.2, pinned; checked by
tests/unit/test_quic_send.py).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Any, Iterable


def byte_view(data: Any) -> memoryview:
    """``data`` as a flat memoryview of bytes."""
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


class StreamParts:
    """Buffers sent as one piece of stream data, in order, without joining them; a buffer
    not over ``bytes`` is copied (module docstring)."""

    __slots__ = ("views", "size")

    def __init__(self, buffers: Iterable[Any]) -> None:
        views = [byte_view(b) for b in buffers]
        self.views = [v if v.contiguous and isinstance(v.obj, bytes) else byte_view(bytes(v))
                      for v in views if v]
        self.size = sum(len(v) for v in self.views)

    def __len__(self) -> int:
        return self.size

    def joined(self) -> bytes:
        return b"".join(self.views)


class HeldBytes:
    """A stream sender's buffer holding the caller's buffers (the bytes not yet
    acknowledged, from the sender's ``_buffer_start``). Offsets in ``ends`` count from the
    first byte ever held; ``front`` is how many of those were acknowledged."""

    __slots__ = ("views", "ends", "front")

    def __init__(self, data: Any = b"") -> None:
        views = list(data.views) if isinstance(data, StreamParts) else [byte_view(data)]
        self.views = views or [byte_view(b"")]
        self.ends = list(accumulate(len(v) for v in self.views))
        self.front = 0

    def __len__(self) -> int:
        return self.ends[-1] - self.front

    def __getitem__(self, key: slice) -> Any:
        """A view of the bytes in ``key`` (a slice with no step), or a copy when they lie
        across buffers."""
        start, stop, _ = key.indices(len(self))
        start, stop = self.front + start, self.front + stop
        ends = self.ends
        i = bisect_right(ends, start)
        if i == len(ends) or start >= stop:
            return self.views[-1][:0]
        first = ends[i] - len(self.views[i])
        if stop <= ends[i]:
            return self.views[i][start - first:stop - first]
        return self._across(i, start - first, stop)

    def _across(self, i: int, skip: int, stop: int) -> bytes:
        """The bytes from offset ``skip`` in buffer ``i`` to absolute offset ``stop``."""
        pieces = [self.views[i][skip:]]
        while self.ends[i] < stop:
            i += 1
            first = self.ends[i] - len(self.views[i])
            pieces.append(self.views[i][:stop - first])
        return b"".join(pieces)

    def __delitem__(self, key: slice) -> None:
        """Drop acknowledged bytes from the front (the one deletion aioquic makes)."""
        if key.start not in (None, 0) or key.step not in (None, 1):
            raise ValueError("HeldBytes only drops bytes from its front")
        self.front += key.stop
        while len(self.ends) > 1 and self.ends[0] <= self.front:
            del self.ends[0], self.views[0]  # wholly acknowledged: let the buffer go

    def __iadd__(self, data: Any) -> Any:
        if not len(self):
            return HeldBytes(data)
        joined = bytearray(self[0:len(self)])  # more than one write: aioquic's own buffer
        joined += data.joined() if isinstance(data, StreamParts) else data
        return joined
