"""Stream data handed to aioquic without copying it (``HeldBytes``).

Owns: the send buffer of an aioquic stream sender (``QuicStreamSender._buffer``, a
``bytearray`` in aioquic 1.7). aioquic copies every ``send_stream_data`` into that bytearray,
then copies each packet's share out of it twice (a bytearray slice, then ``bytes``), and
deletes acknowledged bytes from its front. A sender whose buffer is empty gets a
``HeldBytes`` instead (``LongFrameQuicConnection.send_stream_data``): the first write is
kept as the caller's own buffer (a reply or request of one piece is never copied into the
stream), each packet's share is copied once (``bytes`` of a memoryview slice) and an
acknowledgement only moves the view's start. A second write to a non-empty ``HeldBytes``
turns it back into aioquic's ``bytearray`` (the bytes not yet acknowledged are copied
once), so every sequence of writes stays correct.

Invariants: the caller never changes a buffer after handing it over (the server's replies
and the SDK's requests are built fresh for each stream). The sender touches its buffer
only by ``+=``, slicing, ``del [:n]`` and ``len`` (aioquic 1.7.2, pinned; checked by
tests/unit/test_quic_frames.py).
"""

from __future__ import annotations

from typing import Any


class HeldBytes:
    """A stream sender's buffer holding one caller's buffer (the bytes not yet acknowledged,
    from the sender's ``_buffer_start``)."""

    __slots__ = ("view",)

    def __init__(self, data: Any = b"") -> None:
        view = memoryview(data)
        self.view = view if view.format == "B" and view.ndim == 1 else view.cast("B")

    def __len__(self) -> int:
        return len(self.view)

    def __getitem__(self, key: slice) -> memoryview:
        return self.view[key]

    def __delitem__(self, key: slice) -> None:
        """Drop acknowledged bytes from the front (the one deletion aioquic makes)."""
        if key.start not in (None, 0) or key.step not in (None, 1):
            raise ValueError("HeldBytes only drops bytes from its front")
        self.view = self.view[key.stop:]

    def __iadd__(self, data: Any) -> Any:
        if not self.view:
            return HeldBytes(data)
        joined = bytearray(self.view)  # more than one write: aioquic's own buffer again
        joined += data
        return joined

