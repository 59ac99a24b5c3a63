"""``RefusalLog``: one line per kind of refused link a second; the refusals in between are
counted into the next line of that kind, or into the line ``flush`` writes once the quiet
time is over when no other comes (a flood that stopped is still told in full)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from lurcher.cluster.links import REFUSAL_LOG_S, Links, RefusalLog

TEMPLATE = "cluster link refused: %s"


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_a_flood_that_stops_is_counted_in_full(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="lurcher.cluster.links")
    refusals = RefusalLog()
    assert refusals.warn(0.0, TEMPLATE, "first") is None
    due = [refusals.warn(0.1 * i, TEMPLATE, f"flood {i}") for i in range(1, 6)]
    assert due == [REFUSAL_LOG_S] * 5
    assert lines(caplog) == ["cluster link refused: first"]
    assert refusals.flush(REFUSAL_LOG_S / 2) == REFUSAL_LOG_S  # not yet
    assert len(caplog.records) == 1
    assert refusals.flush(REFUSAL_LOG_S) is None
    assert lines(caplog)[1:] == ["cluster link refused: flood 5 (4 more since the last such line)"]
    assert refusals.flush(10 * REFUSAL_LOG_S) is None and len(caplog.records) == 2


def test_the_next_refusal_of_a_kind_carries_the_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="lurcher.cluster.links")
    refusals = RefusalLog()
    refusals.warn(0.0, TEMPLATE, "a")
    refusals.warn(0.5, TEMPLATE, "b")
    refusals.warn(0.6, "other kind %s", "x")  # its own kind: logged at once
    assert refusals.warn(REFUSAL_LOG_S + 0.1, TEMPLATE, "c") is None
    assert lines(caplog) == ["cluster link refused: a", "other kind x",
                             "cluster link refused: c (1 more since the last such line)"]
    assert refusals.flush(100.0) is None and len(caplog.records) == 3


async def test_links_write_the_count_when_the_flood_stops(
        caplog: pytest.LogCaptureFixture) -> None:
    """Real sockets against a node's link listener: four connections of garbage at once,
    then nothing; the three not logged are told a second later."""
    caplog.set_level(logging.WARNING, logger="lurcher.cluster.links")
    node = Links("c", b"s", 0, {}, lambda *m: None, 1 << 20)
    await node.start("127.0.0.1", 0)
    try:
        for _ in range(4):
            reader, writer = await asyncio.open_connection("127.0.0.1", node.port)
            writer.write(b"GET / HTTP/1.1\r\n\r\n" + bytes(64))
            await reader.read()  # the node's hello, then its close
            writer.close()
        refused = [line for line in lines(caplog) if "refused" in line]
        assert len(refused) == 1, refused
        for _ in range(100):  # bounded: 5 s
            if len([line for line in lines(caplog) if "refused" in line]) == 2:
                break
            await asyncio.sleep(0.05)
        assert "(2 more since the last such line)" in lines(caplog)[-1], lines(caplog)
    finally:
        await node.close()
