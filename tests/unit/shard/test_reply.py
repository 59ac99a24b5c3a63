"""Handler results (``core.shard.reply``): which ones are awaited, and the frame a poll's
``Parts`` reply becomes (its header carries the length of every part, file slices too)."""

from __future__ import annotations

import asyncio

from lurcher.core.shard.reply import RESPONSE_HEADER, Parts, is_awaitable, ok_frame_parts
from lurcher.core.wire.responses.streams import StreamHeader


class Slice:
    """A file part as ``PolledSlice`` shows itself to replies."""
    total_bytes = 5

    def pieces(self) -> list[bytes]:
        return [b"abcde"]


class CustomAwaitable:
    def __await__(self):
        return iter(())


async def _coroutine() -> int:
    return 1


def test_plain_replies_are_not_awaited() -> None:
    for result in (None, b"x", bytearray(b"x"), memoryview(b"x"), [], Parts([b"x"]),
                   StreamHeader(1, 0, 0, 0, 0, "s")):
        assert not is_awaitable(result), result


def test_futures_coroutines_and_custom_awaitables_are_awaited() -> None:
    loop = asyncio.new_event_loop()
    try:
        coroutine = _coroutine()
        assert is_awaitable(coroutine)
        assert is_awaitable(loop.create_future())
        assert is_awaitable(CustomAwaitable())
        loop.run_until_complete(coroutine)
    finally:
        loop.close()


def test_a_parts_reply_frame_counts_every_part() -> None:
    prefix, file_part = b"\x01\x02\x03", Slice()
    frame = ok_frame_parts(Parts([prefix, file_part]))
    assert RESPONSE_HEADER.unpack(frame[0]) == (0, 3 + 5)
    assert frame[1] is prefix and frame[2] is file_part
