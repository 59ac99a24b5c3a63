"""Background tasks of the transports (``transports.connection.run_tracked``): a reply
settled by a task (``settle_soon``) and a WebSocket flush outside the serving turn
(``WebSocketClient.flush_later``) are held until done, and an unexpected error in them is
logged by the transport rather than lost as "Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lurcher.transports import connection
from lurcher.transports.connection import settle_soon
from lurcher.transports.websocket import WebSocketClient


class BrokenCore:
    """A connection core whose ``settle`` fails (a bug in writing the reply)."""

    async def settle(self, pending: Any) -> None:
        raise RuntimeError("write failed")


def broken_websocket_client() -> WebSocketClient:
    client = WebSocketClient.__new__(WebSocketClient)
    client.in_turn = False

    async def flush() -> None:
        raise RuntimeError("send failed")

    client.flush = flush
    return client


async def run_in_background(start) -> bool:
    """Start the task; True when it was held while running. Waits until it is done."""
    before = set(connection._background)
    start()
    started = set(connection._background) - before
    for _ in range(3):
        await asyncio.sleep(0)
    return len(started) == 1 and not started & connection._background


def errors_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR and r.name.startswith("lurcher.transports")]


def test_a_failing_settle_task_is_held_and_its_error_logged(caplog):
    held = asyncio.run(run_in_background(lambda: settle_soon(BrokenCore(), object())))
    assert held and errors_logged(caplog) == ["settling a reply failed"]


def test_a_failing_websocket_flush_is_held_and_its_error_logged(caplog):
    client = broken_websocket_client()
    held = asyncio.run(run_in_background(client.flush_later))
    assert held and errors_logged(caplog) == ["flushing WebSocket output failed"]
    assert not client.in_turn
