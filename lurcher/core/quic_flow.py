"""Bounded receive state of a QUIC connection: flow-control windows and streams the peer opens.

Owns: the receive windows (MAX_DATA, MAX_STREAM_DATA) and the creation of peer-initiated
streams, for ``LongFrameQuicConnection`` (``lurcher.core.quic_frames``), whose
``_write_connection_limits``, ``_write_stream_limits`` and ``_get_or_create_stream``
overrides call ``write_connection_limits``, ``write_stream_limits`` and ``open_stream``.

Windows. aioquic doubles a stream's MAX_STREAM_DATA once the highest offset received passes
half of it, and MAX_DATA once the bytes received pass half of it, whether or not the data
was delivered: a peer that sends one byte at the end of its window makes the receiver
buffer the whole gap (zero-filled) and doubles the window every round trip, with no end.
Here a window moves with the data consumed, and never grows:

- a stream's limit becomes (bytes delivered in order) + ``W_s`` once less than half of
  ``W_s`` is left, ``W_s`` being ``configuration.max_stream_data``
  (``lurcher.core.quic.STREAM_WINDOW_BYTES``);
- the connection's limit becomes (bytes consumed) + ``W_c`` once less than half of ``W_c``
  is left, ``W_c`` being ``configuration.max_data`` (``[quic] receive_window``). Bytes
  consumed are aioquic's count of bytes received less those streams still hold out of order
  (found among the streams that received a frame, ``touched``, no walk of every stream); a
  reset stream's bytes count as consumed and its buffer is freed.

Streams. A frame on stream N opens every lower stream of its kind (RFC 9000 §2.1); aioquic
creates an object for each (about 1 KB), which every later transmit walks: one frame on
stream 4 * 9,999 made 10,000. Here only stream N is created; the lower ones are remembered
as opened (``OpenedStreams``, ranges of stream numbers) and created when a frame for one
arrives. ``max_concurrent_bidi_streams`` keeps its meaning (the streams the peer may have
open at once): the MAX_STREAMS accounting is aioquic's.

Invariants: a stream's receive buffer never holds more than ``W_s`` bytes and a connection's
streams together never more than ``W_c``; limits never decrease; a peer sending beyond a
limit is closed with FLOW_CONTROL_ERROR (aioquic's checks, unchanged); a stream exists as an
object only once a frame for it arrived. aioquic is pinned
(``lurcher.core.quic_frames.AIOQUIC_VERSION``) and tests/unit/test_quic_frames.py fails if the
methods mirrored here change.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable

from aioquic.quic.connection import (CONNECTION_LIMIT_FRAME_CAPACITY,
                                     MAX_STREAM_DATA_FRAME_CAPACITY, stream_is_client_initiated)
from aioquic.quic.packet import QuicFrameType


class OpenedStreams:
    """Stream numbers (stream ID // 4) of one kind the peer opened implicitly and that have
    no stream object yet: sorted, disjoint ``[start, stop)`` ranges, looked up by bisection."""

    __slots__ = ("starts", "stops")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.stops: list[int] = []

    def __contains__(self, number: int) -> bool:
        at = bisect_right(self.starts, number) - 1
        return at >= 0 and number < self.stops[at]

    def add_above(self, start: int, stop: int) -> None:
        """Add ``[start, stop)``, which lies above every range held."""
        if self.stops and self.stops[-1] == start:
            self.stops[-1] = stop
        else:
            self.starts.append(start)
            self.stops.append(stop)

    def remove(self, number: int) -> None:
        """Remove ``number``, which is held."""
        at = bisect_right(self.starts, number) - 1
        start, stop = self.starts[at], self.stops[at]
        if stop - start == 1:
            del self.starts[at], self.stops[at]
        elif number == start:
            self.starts[at] = number + 1
        elif number == stop - 1:
            self.stops[at] = number
        else:
            self.stops[at] = number
            self.starts.insert(at + 1, number + 1)
            self.stops.insert(at + 1, stop)


def init_flow(quic: Any) -> None:
    """Give ``quic`` the state this module keeps (once per connection)."""
    state = quic.__dict__
    state.setdefault("_lurcher_touched", set())    # streams that received a frame
    state.setdefault("_lurcher_holding", set())    # streams holding data out of order
    state.setdefault("_lurcher_opened", {})        # stream ID & 3 -> OpenedStreams


def open_stream(quic: Any, frame_type: int, stream_id: int,
                create: Callable[[Any, int, int], Any]) -> Any:
    """The stream a received frame is for (``create``: aioquic's ``_get_or_create_stream``,
    which raises as aioquic does), created alone when new (module docstring)."""
    stream = quic._streams.get(stream_id)
    if stream is None:
        stream = _create_alone(quic, frame_type, stream_id, create)
    quic._lurcher_touched.add(stream)
    return stream


def _create_alone(quic: Any, frame_type: int, stream_id: int,
                  create: Callable[[Any, int, int], Any]) -> Any:
    if stream_is_client_initiated(stream_id) == quic._is_client:
        return create(quic, frame_type, stream_id)  # ours: aioquic refuses or finds it discarded
    limit, number = quic._stream_limit(stream_id), stream_id // 4
    opened = quic._lurcher_opened.setdefault(stream_id & 3, OpenedStreams())
    used = limit.used
    if number < used and number not in opened:
        return create(quic, frame_type, stream_id)  # discarded: aioquic's StreamFinishedError
    limit.used = number  # aioquic creates every stream from ``used`` up to this one
    try:
        stream = create(quic, frame_type, stream_id)
    except BaseException:
        limit.used = used
        raise
    if number < used:
        limit.used = used
        opened.remove(number)
    elif number > used:
        opened.add_above(used, number)
    return stream


def write_stream_limits(quic: Any, builder: Any, stream: Any) -> None:
    """aioquic's ``_write_stream_limits`` with the stream's window moved by the bytes it
    delivered, never doubled."""
    receiver = stream.receiver
    if stream.max_stream_data_local and not receiver.is_finished:
        window = quic._configuration.max_stream_data
        consumed = receiver._buffer_start
        if stream.max_stream_data_local - consumed <= window >> 1:
            stream.max_stream_data_local = consumed + window
    if stream.max_stream_data_local_sent != stream.max_stream_data_local:
        _push_frame(builder, QuicFrameType.MAX_STREAM_DATA, MAX_STREAM_DATA_FRAME_CAPACITY,
                    quic._on_max_stream_data_delivery, stream,
                    stream.stream_id, stream.max_stream_data_local)
        stream.max_stream_data_local_sent = stream.max_stream_data_local
        if quic._quic_logger is not None:
            builder.quic_logger_frames.append(quic._quic_logger.encode_max_stream_data_frame(
                maximum=stream.max_stream_data_local, stream_id=stream.stream_id))


def write_connection_limits(quic: Any, builder: Any) -> None:
    """aioquic's ``_write_connection_limits`` with MAX_DATA moved by the bytes consumed,
    never doubled."""
    max_data = quic._local_max_data
    window = quic._configuration.max_data
    consumed = max_data.used - unread_bytes(quic)
    if max_data.value - consumed <= window >> 1:
        max_data.value = consumed + window
    for limit in (max_data, quic._local_max_streams_bidi, quic._local_max_streams_uni):
        if limit is not max_data and limit.sent - limit.used >= limit.value - limit.sent:
            continue  # aioquic batches MAX_STREAMS
        if limit.value != limit.sent:
            _push_frame(builder, limit.frame_type, CONNECTION_LIMIT_FRAME_CAPACITY,
                        quic._on_connection_limit_delivery, limit, limit.value)
            limit.sent = limit.value
            if quic._quic_logger is not None:
                builder.quic_logger_frames.append(quic._quic_logger.encode_connection_limit_frame(
                    frame_type=limit.frame_type, maximum=limit.value))


def _push_frame(builder: Any, frame_type: int, capacity: int, on_delivery: Any,
                subject: Any, *values: int) -> None:
    """One limit frame of ``values`` (varints), ``on_delivery(subject)`` when acknowledged
    or lost, as aioquic's builder takes them."""
    buf = builder.start_frame(frame_type, capacity=capacity, handler=on_delivery,
                              handler_args=(subject,))
    for value in values:
        buf.push_uint_var(value)


def unread_bytes(quic: Any) -> int:
    """Bytes received and not delivered: those streams hold out of order. Looks only at
    streams that received a frame since the last call or held such bytes then; frees the
    buffer of a stream the peer reset (its bytes will never be delivered)."""
    holding = quic._lurcher_holding
    touched = quic._lurcher_touched
    if touched:
        holding |= touched
        touched.clear()
    unread = 0
    for stream in list(holding):
        receiver = stream.receiver
        if receiver.is_finished or not receiver._buffer:
            if receiver._buffer:
                receiver._buffer = bytearray()
            holding.discard(stream)
        else:
            unread += receiver.highest_offset - receiver._buffer_start
    return unread
