"""A request's buffers held by a QUIC stream without joining them (issue 18):
``StreamParts`` and the several-buffer ``HeldBytes`` give aioquic's sender the same bytes as
its own bytearray would, views where a share lies in one buffer, and hold only buffers that
cannot change."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from aioquic.quic.stream import QuicStreamSender
from hypothesis import given, settings
from hypothesis import strategies as st

from lurcher.core.quic import QuicSettings
from lurcher.core.quic_send import HeldBytes, StreamParts
from tests.support.quic_pair import connected_pair, transfer

parts_strategy = st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=6)
steps_strategy = st.lists(st.tuples(st.integers(0, 250), st.integers(0, 250),
                                    st.integers(0, 30)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(parts=parts_strategy, steps=steps_strategy)
def test_held_parts_read_and_drop_like_aioquics_bytearray(parts: list[bytes],
                                                          steps: list[tuple]) -> None:
    held, model = HeldBytes(StreamParts(parts)), bytearray(b"".join(parts))
    for a, b, drop in steps:
        assert len(held) == len(model)
        start, stop = min(a, b, len(model)), min(max(a, b), len(model))
        assert bytes(held[start:stop]) == bytes(model[start:stop])
        drop = min(drop, len(model))
        del held[:drop]
        del model[:drop]
    assert bytes(held[0:len(held)]) == bytes(model)


def test_a_share_within_one_buffer_is_a_view_and_one_across_two_is_a_copy() -> None:
    head, body = b"head", bytes(range(100))
    held = HeldBytes(StreamParts([head, memoryview(body)]))
    inside = held[10:20]
    assert isinstance(inside, memoryview) and inside.obj is body
    assert held[2:8] == b"ad" + body[:4]
    del held[:4]  # the head wholly acknowledged: let go
    assert len(held.views) == 1 and held.views[0].obj is body


def test_only_contiguous_buffers_over_bytes_are_held_others_are_copied() -> None:
    kept, reused, strided = b"immutable", bytearray(b"mutable"), memoryview(b"a-b-c")[::2]
    parts = StreamParts([kept, reused, memoryview(bytearray(b"x")).toreadonly(), b"", strided])
    assert parts.views[0].obj is kept
    assert all(isinstance(v.obj, bytes) and v.obj is not reused and v.contiguous
               for v in parts.views)
    reused[:] = b"CHANGED"
    assert parts.joined() == b"immutablemutablexabc" and len(parts) == 20
    held = HeldBytes(parts)
    assert bytes(held[15:20]) == b"exabc"  # across the copied buffers


def test_aioquics_sender_touches_its_buffer_only_as_held_bytes_serves_it() -> None:
    uses = {line.strip() for line in inspect.getsource(QuicStreamSender).splitlines()
            if re.search(r"self\._buffer\b(?!_)", line)}
    assert uses == {"self._buffer = bytearray()",
                    "self._buffer[start - self._buffer_start : stop - self._buffer_start]",
                    "del self._buffer[:size]", "self._buffer += data"}


def test_a_second_write_falls_back_to_aioquics_bytearray() -> None:
    held = HeldBytes(StreamParts([b"ab", b"cd"]))
    del held[:1]
    held += StreamParts([b"ef", b"gh"])
    assert isinstance(held, bytearray) and held == bytearray(b"bcdefgh")


def test_a_request_in_parts_crosses_intact_with_a_lost_datagram(tmp_path: Path) -> None:
    big = QuicSettings(initial_mtu=64_000)
    cq, sq, _, _ = connected_pair(tmp_path, big, big)
    header, index, blob = b"\x01" * 8, bytes(range(256)) * 64, bytes(range(251)) * 4000
    stream_id = cq.get_next_available_stream_id()
    cq.send_stream_data(stream_id, StreamParts([header, index, blob]), end_stream=True)
    held = cq._streams[stream_id].sender._buffer
    assert isinstance(held, HeldBytes) and held.views[-1].obj is blob  # not joined
    received, _ = transfer(cq, sq, drop={1})  # the first datagram, across the buffers
    assert bytes(received) == header + index + blob
    assert len(held) == 0 and len(held.views) == 1  # acknowledged; earlier buffers let go


def test_parts_written_after_aioquics_bytearray_took_over_are_appended(tmp_path: Path) -> None:
    cq, _, _, _ = connected_pair(tmp_path, QuicSettings(), QuicSettings())
    stream_id = cq.get_next_available_stream_id()
    for data in (b"one", b"two", StreamParts([b"three", b"four"])):
        cq.send_stream_data(stream_id, data)
    assert cq._streams[stream_id].sender._buffer == bytearray(b"onetwothreefour")
