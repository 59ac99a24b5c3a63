"""Read deadlines of the HTTP listener: a request must arrive in bounded time.

uvicorn's h11 protocol closes a connection only when it stays silent for ``keep_alive``
seconds after a response; a connection that never sends a request, or sends its header
or body a byte at a time, was held open forever (slowloris), each one a socket and a
buffer. ``DeadlineH11Protocol`` adds two timers, following h11's view of the client:

- header: from the connection's accept (or the end of the previous response) the whole
  request header must arrive within ``header_s``, however the bytes trickle in; over TLS
  the accept comes before the handshake (the protocol is built then,
  ``transports.handshake``), so the handshake's time counts in the first request's;
- body: while the body is being received, each piece must follow the one before within
  ``body_s`` (time the server itself stops reading, to hold back a body the application
  has not taken yet, is not counted);
- body rate: the body as a whole must come at ``body_min_rate`` bytes a second or more,
  after a grace of ``body_s``: by ``body_s + received / body_min_rate`` seconds from its
  start. Without it a client dripping a byte just inside ``body_s`` held a connection
  and its body buffer for hours; with it a body takes at most ``body_s`` plus its size
  over the rate. Time the server holds the body back moves that due time on.

A request late in either is answered ``408 Request Timeout`` (when any of it arrived) and
the connection closed; a connection that sent nothing is dropped at once (aborted: over
TLS a close sends close_notify and waits for the client's, up to the loop's 30 s, the
connection still counted in the cap). Once the request is
complete no timer runs: the application's time is not the client's. ``None`` disables a
timer. Invariant: at most one timer is armed per connection, and none once it is lost.

Given a ``ConnectionCap`` (``transports.admission``), the protocol counts in it from
``connection_made`` to ``connection_lost`` (with the connections still in their TLS
handshake, ``transports.handshake``), and answers a connection beyond the cap 503 and
closes it as it is made, arming no timer. A request
asking to upgrade the connection (no listener here upgrades: WebSocket has its own) is
served as a plain request, and said at debug level only: uvicorn warned twice for each
(advising to install a WebSocket library), so any client could fill the log.
"""

from __future__ import annotations

import asyncio
import functools
import math
import logging
from dataclasses import dataclass
from typing import Any, Callable

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from lurcher.transports.connection import peer_address
from lurcher.transports.admission import SERVICE_UNAVAILABLE, ConnectionCap

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\n"
                   b"connection: close\r\ncontent-length: 16\r\n\r\nrequest too slow")


@dataclass(frozen=True)
class ReadDeadlines:
    """Seconds allowed for a request's header and between pieces of its body; the least
    average rate of a body in bytes a second (after ``body_s`` of grace)."""

    header_s: float | None
    body_s: float | None
    body_min_rate: float | None = None


def protocol_factory(deadlines: ReadDeadlines,
                     cap: ConnectionCap | None = None) -> Callable[..., DeadlineH11Protocol]:
    """What ``uvicorn.Config(http=...)`` takes: builds the protocol with ``deadlines`` (and
    the listener's connection ``cap``, if any)."""
    return functools.partial(DeadlineH11Protocol, deadlines=deadlines, cap=cap)


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the header and body read deadlines (and, given one, the
    listener's connection cap)."""

    def __init__(self, *args: Any, deadlines: ReadDeadlines, cap: ConnectionCap | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadlines = deadlines
        self.cap = cap
        self.counted = False  # in cap's count until connection_lost
        self.read_timer: asyncio.TimerHandle | None = None
        self.waiting_for: str | None = None  # "header", "body" or None
        self.body_due = math.inf  # loop time by which the body received so far was due
        # loop time of the accept (built then, before a TLS handshake); None once the
        # first request's header deadline is armed
        self.accepted_at: float | None = self.loop.time()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.cap is not None:
            self.counted = self.cap.admit()
            if not self.counted:
                transport.write(SERVICE_UNAVAILABLE)
                transport.close()
                return
        self._follow_request()

    def data_received(self, data: bytes) -> None:
        receiving = self.waiting_for == "body"
        super().data_received(data)
        if receiving and self.deadlines.body_min_rate:
            self.body_due += len(data) / self.deadlines.body_min_rate
        self._follow_request(arrived=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.counted:
            self.counted = False
            self.cap.release()
        super().connection_lost(exc)

    def _unsupported_upgrade_warning(self) -> None:
        """uvicorn's two warnings per upgrade request, as one debug line (module doc)."""
        log.debug("HTTP %s: upgrade request served without upgrading",
                  peer_address(self.client))

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm()  # the connection is the WebSocket protocol's from here on
        super().handle_websocket_upgrade(event)

    def _follow_request(self, arrived: bool = False) -> None:
        """Arm the timer the client's h11 state calls for: the header deadline runs from
        the start of a request, the body timer restarts with every piece that arrives."""
        state = self.conn.their_state
        if self.transport.is_closing():
            self._disarm()
        elif state is h11.IDLE:
            if self.waiting_for != "header":
                self._arm("header", self._header_wait())
        elif state is h11.SEND_BODY:
            if self.waiting_for != "body":
                self._start_body()
            elif arrived:
                self._arm("body", self.deadlines.body_s)
        else:
            self._disarm()

    def _header_wait(self) -> float | None:
        """The seconds a request header may take from now: ``header_s``, for the first
        request less the time since the accept (its TLS handshake)."""
        seconds, accepted_at, self.accepted_at = self.deadlines.header_s, self.accepted_at, None
        if seconds is None or accepted_at is None:
            return seconds
        return seconds - (self.loop.time() - accepted_at)

    def _start_body(self) -> None:
        """The body begins: its rate is due from now, after the grace of ``body_s``."""
        grace, rate = self.deadlines.body_s, self.deadlines.body_min_rate
        now = self.loop.time()
        self.body_due = now + grace if grace and rate else math.inf
        self._arm("body", grace, now)

    def _arm(self, phase: str, seconds: float | None, now: float | None = None) -> None:
        """Arm ``phase``'s timer for ``seconds``, or (for a body) until the rate's due time
        when that comes first; which of the two limits it is, is decided here, from one
        reading of the clock (a tie is the gap: at the body's start they are equal)."""
        self._disarm()
        self.waiting_for = phase
        if seconds is None:
            return
        by_rate, wait = False, seconds
        if phase == "body":
            rate_wait = self.body_due - (self.loop.time() if now is None else now)
            by_rate, wait = rate_wait < seconds, min(seconds, rate_wait)
        self.read_timer = self.loop.call_later(max(wait, 0.0), self._late, phase, by_rate)

    def _disarm(self) -> None:
        self.waiting_for = None
        if self.read_timer is not None:
            self.read_timer.cancel()
            self.read_timer = None

    def _late(self, phase: str, by_rate: bool) -> None:
        self.read_timer = None
        seconds = self.deadlines.body_s if phase == "body" else self.deadlines.header_s
        assert seconds is not None
        if self.transport.is_closing():
            return
        if phase == "body" and self.flow.read_paused:
            # the server holds the body back, not the client
            self.body_due = max(self.body_due, self.loop.time() + seconds)
            self._arm(phase, seconds)
            return
        started = phase == "body" or bool(self.conn.trailing_data[0])
        log.info("HTTP %s: request %s, connection closed", peer_address(self.client),
                 self._lateness(phase, seconds, by_rate))
        self.waiting_for = None
        if not started:  # nothing to answer (over TLS a close would wait for its close_notify)
            self.transport.abort()
            return
        self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()

    def _lateness(self, phase: str, seconds: float, by_rate: bool) -> str:
        """What the late request failed: a deadline or gap of ``seconds``, or the body's
        least rate."""
        if by_rate:
            return f"body slower than {self.deadlines.body_min_rate:g} bytes/s"
        return f"{phase} not received within {seconds:g} s"
