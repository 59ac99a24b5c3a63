"""Command observers (``core.shard.observers.observed``): told exactly once per request,
with the right status, for plain results, raised errors, awaitables and futures (a send's
reply is the future of its write: told by a done callback, the same future returned)."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.core.shard.observers import UNEXPECTED_FAILURE, observed
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def on_command(self, code: int, status: int, duration_s: float) -> None:
        assert duration_s >= 0
        self.seen.append((code, status))


def test_a_plain_result_is_told_at_once():
    r = Recorder()
    assert observed([r], 1, lambda: "pong") == "pong"
    assert r.seen == [(1, 0)]


def test_a_raised_error_is_told_with_its_status():
    r = Recorder()

    def fail():
        raise IggyError(ErrorCode.STREAM_ID_NOT_FOUND, "x")
    with pytest.raises(IggyError):
        observed([r], 100, fail)
    assert r.seen == [(100, ErrorCode.STREAM_ID_NOT_FOUND)]


async def test_a_future_is_returned_itself_and_told_when_done():
    r = Recorder()
    future = asyncio.get_running_loop().create_future()
    assert observed([r], 101, lambda: future) is future
    assert r.seen == []
    future.set_result(None)
    await asyncio.sleep(0)
    assert r.seen == [(101, 0)]


async def test_a_failed_or_cancelled_future_is_told_with_its_status():
    r = Recorder()
    loop = asyncio.get_running_loop()
    failed, cancelled = loop.create_future(), loop.create_future()
    observed([r], 101, lambda: failed)
    observed([r], 101, lambda: cancelled)
    failed.set_exception(IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, "disk"))
    cancelled.cancel()
    await asyncio.sleep(0)
    assert sorted(r.seen) == sorted([(101, ErrorCode.CANNOT_WRITE_TO_FILE),
                                     (101, UNEXPECTED_FAILURE)])


async def test_a_coroutine_is_told_once_awaited():
    r = Recorder()

    async def later():
        return 7
    pending = observed([r], 2, later)
    assert r.seen == []
    assert await pending == 7
    assert r.seen == [(2, 0)]
