"""TLS handshakes of the listeners (TCP, WebSocket, HTTP), counted in their connection cap.

A listener created with ``ssl=`` has the event loop do the TLS handshake before the
protocol's ``connection_made``: a connection still in it was counted in no cap, so clients
that opened TCP connections and never finished (or trickled) their ClientHello held
descriptors beyond the cap for the loop's 60 s handshake timeout, until new clients were
reset and a topic's partition files could not be created. Here the listener accepts plain
connections and the first protocol of each is a ``TlsHandshake``:

- counted in the listener's cap as the connection is made; one beyond it is closed at once,
  before anything is read or written (as a plain TCP one; no 503 over TLS, which would
  need the handshake);
- it runs ``loop.start_tls`` with ``TlsAccept.timeout_s`` (``limits.login_timeout`` for
  the binary listeners, ``limits.http_header_timeout`` for HTTP; "none": the loop's 60 s);
- its count is released exactly once, whichever way the handshake ends (done, failed,
  timed out, the peer gone);
- once the handshake is done the TLS transport goes to the application protocol, which
  counts itself from its own ``connection_made`` (the handshake's count is released just
  before, in the same callback, so it always finds room); bytes (and an end of stream)
  that came in before that handover are passed on to it in order;
- the listener's ``Handshakes`` holds those in flight: once it is closed (the listener is,
  the server stopping) they are aborted, and so is a connection accepted after, so none is
  handed to its protocol then (it would open a session, and have its requests run, on a
  shard already closed).

Invariants: with a cap, ``cap.open`` counts every connection from its accept to its end,
whether in its handshake or handed over; no connection is handed over once its listener's
``Handshakes`` is closed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable

from lurcher.runtime.settings import seconds
from lurcher.transports.admission import ConnectionCap
from lurcher.transports.connection import peer_address, run_tracked

log = logging.getLogger(__name__)


class Handshakes:
    """The TLS handshakes of one listener in flight (each ``TlsHandshake`` adds and removes
    itself); ``close`` aborts them, and any made after."""

    def __init__(self) -> None:
        self.in_flight: set[TlsHandshake] = set()
        self.closed = False

    def close(self) -> None:
        """The listener is closing: no handshake is handed over from now on."""
        self.closed = True
        for handshake in list(self.in_flight):
            handshake.abort()


@dataclass(frozen=True)
class TlsAccept:
    """The server context of a listener's TLS, the seconds its handshake may take (None:
    the loop's default) and its handshakes in flight (closed with the listener)."""

    context: ssl.SSLContext
    timeout_s: float | None
    handshakes: Handshakes = field(default_factory=Handshakes)


def tls_accept(context: ssl.SSLContext | None, timeout_us: int) -> TlsAccept | None:
    """The TLS of a listener (None without a context); ``timeout_us``: a typed duration
    of ``[limits]`` ("none": the loop's default)."""
    if context is None:
        return None
    return TlsAccept(context, seconds(timeout_us) or None)


def gated(factory: Callable[..., asyncio.BaseProtocol], tls: TlsAccept | None,
          cap: ConnectionCap | None) -> Callable[..., asyncio.BaseProtocol]:
    """A protocol factory for a listener created without ``ssl=``: ``factory`` itself
    when ``tls`` is None, else one building a ``TlsHandshake`` around what it builds."""
    if tls is None:
        return factory
    return lambda *args, **kwargs: TlsHandshake(factory(*args, **kwargs), tls, cap)


def deliver(protocol: Any, data: bytes) -> None:
    """Pass ``data`` to ``protocol`` as the loop would (into its buffer if it has one)."""
    if not hasattr(protocol, "get_buffer"):
        protocol.data_received(data)
        return
    view = memoryview(data)
    while view:
        buffer = protocol.get_buffer(len(view))
        taken = min(len(buffer), len(view))
        buffer[:taken] = view[:taken]
        protocol.buffer_updated(taken)
        view = view[taken:]


class TlsHandshake(asyncio.Protocol):
    """The protocol of one accepted connection until its TLS handshake is done (module
    doc); then ``app``'s.

    The loop starts reading a connection as soon as it is made, and ``start_tls`` takes it
    over only in a later turn: what arrives before (the ClientHello, an end of stream, a
    reset) is held, reading paused, and passed on to the TLS layer right after it started.
    """

    def __init__(self, app: asyncio.BaseProtocol, tls: TlsAccept,
                 cap: ConnectionCap | None) -> None:
        self.app, self.tls, self.cap = app, tls, cap
        self.counted = False  # in cap's count until the handshake ends
        self.raw: list[bytes] | None = []  # plain bytes before start_tls; None once passed on
        self.raw_end: tuple[str, Any] | None = None  # ("eof", None) or ("lost", exc) then
        self.early: list[bytes] = []  # decrypted bytes after the handshake, before the handover
        self.eof = False
        self.transport: Any = None  # the plain transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if self.tls.handshakes.closed:
            transport.abort()  # the listener is closing
            return
        if self.cap is not None:
            if not self.cap.admit():
                transport.close()  # beyond the cap: nothing read, no handshake
                return
            self.counted = True
        self.tls.handshakes.in_flight.add(self)
        run_tracked(self.handshake(transport), "a TLS handshake")

    async def handshake(self, transport: Any) -> None:
        """Run the handshake, release its count, hand a done one over."""
        loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        upgrade = loop.create_task(loop.start_tls(
            transport, self, self.tls.context, server_side=True,
            ssl_handshake_timeout=self.tls.timeout_s))
        await asyncio.sleep(0)  # upgrade's first turn: the TLS layer set, its start queued
        loop.call_soon(self.pass_on_raw, transport)  # so this runs right after that start
        try:
            tls = await upgrade
        except (OSError, EOFError) as exc:  # failed, timed out or reset: the socket is closed
            log.debug("TLS handshake with %s failed: %s", peer_address(peer), exc)
            tls = None
        finally:
            self.release()
            self.tls.handshakes.in_flight.discard(self)
        if tls is None or tls.is_closing():
            return
        if self.tls.handshakes.closed:  # done as the listener closed: its abort came first
            tls.abort()
            return
        self.hand_over(tls)

    def abort(self) -> None:
        """Drop the connection (its handshake then fails, and the count is released)."""
        self.transport.abort()

    def pass_on_raw(self, transport: Any) -> None:
        """Give the TLS layer what came in before it took the connection over."""
        raw, self.raw = self.raw, None
        layer = transport.get_protocol()
        if layer is self or layer is None:  # start_tls failed before taking it, or aborted
            return
        for data in raw:
            deliver(layer, data)
        if self.raw_end is not None:
            end, exc = self.raw_end
            if end == "eof":
                layer.eof_received()
            else:
                layer.connection_lost(exc)

    def release(self) -> None:
        if self.counted:
            self.counted = False
            self.cap.release()

    def hand_over(self, tls: asyncio.Transport) -> None:
        """``app`` takes the TLS transport, then what arrived before it did."""
        tls.set_protocol(self.app)
        self.app.connection_made(tls)
        for data in self.early:
            if tls.is_closing():
                return
            deliver(self.app, data)
        ended = self.eof and not tls.is_closing()
        if ended and not self.app.eof_received():  # type: ignore[attr-defined]
            tls.close()

    # -- calls of the plain transport (before start_tls), then of the TLS layer ------------
    def data_received(self, data: bytes) -> None:
        if self.raw is None:  # decrypted, by the TLS layer
            self.early.append(data)
            return
        self.raw.append(data)
        self.transport.pause_reading()  # until start_tls reads on

    def eof_received(self) -> bool:
        if self.raw is None:  # the peer's close_notify, from the TLS layer, which shuts down
            self.eof = True  # whatever this answers (and logs a warning for a true answer)
            return False
        if self.raw_end is None:
            self.raw_end = ("eof", None)
        return True  # the plain transport stays open: the TLS layer decides

    def connection_lost(self, exc: Exception | None) -> None:
        if self.raw is not None and self.raw_end is None:
            self.raw_end = ("lost", exc)
