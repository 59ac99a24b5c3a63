"""The SDK's QUIC response gathering (``lurcher.sdk.connection.quic._Response``): a frame
that comes in pieces is copied into its own buffer as the pieces arrive (nothing kept, no
join at the end), a lone piece is the response as it is, and ``response_buffer_size`` is
checked against the header's length as soon as the header is in."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import FRAME_HEADER
from lurcher.sdk.connection.quic import _Response

LIMIT = 1_000


def frame(payload: bytes, status: int = 0) -> bytes:
    return FRAME_HEADER.pack(status, len(payload)) + payload


def response(limit: int = LIMIT) -> tuple[asyncio.AbstractEventLoop, _Response]:
    loop = asyncio.new_event_loop()
    return loop, _Response(loop.create_future(), limit)


def feed(r: _Response, pieces: list[bytes], end: bool = True) -> None:
    for i, piece in enumerate(pieces):
        r.data(memoryview(piece), end and i == len(pieces) - 1)


def test_pieces_are_copied_into_the_frame_as_they_arrive() -> None:
    loop, r = response()
    whole = frame(bytes(range(256)) * 3)
    pieces = [whole[:3], whole[3:8], whole[8:100], whole[100:500], whole[500:]]
    feed(r, pieces[:3], end=False)
    assert r.chunks == [] and r.filled == 100  # copied in, not held
    feed(r, pieces[3:])
    assert bytes(r.done.result()) == whole
    loop.close()


def test_a_lone_piece_that_ends_the_stream_is_the_response_itself() -> None:
    loop, r = response()
    piece = memoryview(frame(b"pong"))
    r.data(piece, True)
    assert r.done.result() is piece
    loop.close()


def test_a_frame_longer_than_the_limit_fails_when_its_header_arrives() -> None:
    loop, r = response()
    whole = frame(b"x" * (LIMIT + 1))
    feed(r, [whole[:20]], end=False)
    with pytest.raises(IggyError) as caught:
        r.done.result()
    assert caught.value.code == ErrorCode.INVALID_BYTES_RESPONSE
    assert r.frame is None  # nothing of its size was allocated
    feed(r, [whole[20:]])  # the rest changes nothing
    assert r.done.exception() is caught.value
    loop.close()


def test_a_lone_piece_longer_than_the_limit_fails() -> None:
    loop, r = response()
    r.data(frame(b"x" * (LIMIT + 1)), True)
    with pytest.raises(IggyError) as caught:
        r.done.result()
    assert caught.value.code == ErrorCode.INVALID_BYTES_RESPONSE
    loop.close()


def test_bytes_past_the_frame_are_dropped() -> None:
    loop, r = response()
    whole = frame(b"abc" * 10)
    feed(r, [whole[:10], whole[10:] + b"trailing junk"])
    assert bytes(r.done.result()) == whole
    loop.close()


def test_a_stream_ending_inside_the_frame_gives_what_came() -> None:
    loop, r = response()
    whole = frame(b"y" * 500)
    feed(r, [whole[:50], whole[50:200]])
    assert bytes(r.done.result()) == whole[:200]  # the connection reports it incomplete
    loop.close()


def test_a_stream_ending_inside_the_header_is_an_incomplete_read() -> None:
    loop, r = response()
    feed(r, [b"\x00\x00", b"\x00"])
    with pytest.raises(asyncio.IncompleteReadError):
        r.done.result()
    loop.close()
