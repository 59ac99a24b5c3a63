"""Which limit ``DeadlineH11Protocol`` names when a request body is late.

At a body's start its gap timer and its rate's due time are the same instant, so a body
that stops is late by the gap (``body not received within N s``). The protocol read the
clock twice (once for the due time, once for the wait) and called the body too slow
whenever the clock moved between them: on a loaded machine the log named the rate for a
body that had simply stopped. Driven here with a clock that moves at every reading, on a
real h11 protocol with a transport that records what it is given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
import uvicorn
from uvicorn.server import ServerState

from lurcher.transports.http.deadlines import DeadlineH11Protocol, ReadDeadlines

LOGIN = b'{"username": "iggy", "password": "iggy"}'
HEADER = (b"POST /users/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: " + str(len(LOGIN)).encode() + b"\r\n\r\n")


class MovingClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves a microsecond at every reading (a busy machine)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def time(self) -> float:
        self.now += 1e-6
        return self.now


class RecordingTransport(asyncio.Transport):
    """What the protocol writes, and whether it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written, self.closed = b"", False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 80)}.get(name)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


async def _app(scope, receive, send) -> None:  # never reached: the body stays incomplete
    raise AssertionError("the application ran")


@pytest.fixture
def loop() -> Iterator[MovingClockLoop]:
    loop = MovingClockLoop()
    yield loop
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


def _protocol(loop: MovingClockLoop, rate: float | None) -> DeadlineH11Protocol:
    config = uvicorn.Config(_app, lifespan="off", log_config=None)
    protocol = DeadlineH11Protocol(config, ServerState(), {}, _loop=loop,
                                   deadlines=ReadDeadlines(2.0, 2.0, rate))
    protocol.connection_made(RecordingTransport())
    return protocol


def _fire(protocol: DeadlineH11Protocol) -> None:
    """Run the armed timer as the loop would when it is due."""
    timer = protocol.read_timer
    assert timer is not None
    timer._run()


@pytest.mark.parametrize("rate", [1.0, None])
def test_a_body_that_stops_is_late_by_its_gap(loop, rate, caplog) -> None:
    protocol = _protocol(loop, rate)
    protocol.data_received(HEADER + LOGIN[:5])
    assert protocol.waiting_for == "body"
    with caplog.at_level(logging.INFO, logger="lurcher.transports.http.deadlines"):
        _fire(protocol)
    assert protocol.transport.written.startswith(b"HTTP/1.1 408 ")
    assert protocol.transport.closed
    assert "request body not received within 2 s" in caplog.text, caplog.text


def test_a_body_behind_its_rate_is_late_by_the_rate(loop, caplog) -> None:
    """The rate's due time comes first once the gap timer restarts with each piece."""
    protocol = _protocol(loop, 1.0)
    protocol.data_received(HEADER)
    loop.now += 1.5
    protocol.data_received(LOGIN[:1])  # 1 byte: 1 s more; due 3 s in, next gap 3.5 s in
    with caplog.at_level(logging.INFO, logger="lurcher.transports.http.deadlines"):
        _fire(protocol)
    assert "request body slower than 1 bytes/s" in caplog.text, caplog.text
