"""The SDK's QUIC response frame (``_Response``): gathered into one buffer of the size its
header gives as the stream's data arrives, with the same outcomes as joining it at the end:
the frame, a too-large response refused, a stream that ends early an IncompleteReadError."""

from __future__ import annotations

import asyncio
import struct

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.connection.quic import _Response

LIMIT = 1_000


def frame(payload: bytes, status: int = 0) -> bytes:
    return struct.pack("<II", status, len(payload)) + payload


def feed(chunks: list[bytes], limit: int = LIMIT) -> asyncio.Future:
    response = _Response(asyncio.get_running_loop().create_future(), limit)
    for i, chunk in enumerate(chunks):
        response.data(chunk, end_stream=i == len(chunks) - 1)
    return response.done


@pytest.mark.parametrize("cuts", [[], [3], [8], [5, 9, 40], list(range(1, 108))])
async def test_the_frame_arrives_whole_however_the_stream_cuts_it(cuts: list[int]) -> None:
    whole = frame(bytes(range(100)))
    bounds = [0, *cuts, len(whole)]
    done = feed([whole[a:b] for a, b in zip(bounds, bounds[1:])])
    assert bytes(done.result()) == whole


async def test_a_response_over_the_limit_is_refused_once_its_header_is_in() -> None:
    response = _Response(asyncio.get_running_loop().create_future(), LIMIT)
    response.data(frame(b"x" * (LIMIT + 1))[:12], end_stream=False)  # the rest never needed
    with pytest.raises(IggyError) as refused:
        response.done.result()
    assert refused.value.status == ErrorCode.INVALID_BYTES_RESPONSE
    response.data(b"more", end_stream=True)  # later data is ignored


async def test_a_response_of_exactly_the_limit_is_taken() -> None:
    whole = frame(b"y" * LIMIT)
    assert bytes(feed([whole[:500], whole[500:]]).result()) == whole


@pytest.mark.parametrize("chunks,got,wanted", [
    ([b"\x00\x00"], b"\x00\x00", 8),
    ([frame(b"abcdef")[:11]], frame(b"abcdef")[:11], 14),
    ([b""], b"", 8),
])
async def test_a_stream_that_ends_early_is_an_incomplete_read(chunks: list[bytes], got: bytes,
                                                              wanted: int) -> None:
    with pytest.raises(asyncio.IncompleteReadError) as short:
        feed(chunks).result()
    assert short.value.partial == got and short.value.expected == wanted


async def test_bytes_past_the_announced_length_are_dropped() -> None:
    whole = frame(b"abc")
    assert bytes(feed([whole + b"trailing"]).result()) == whole
