"""The TCP/TLS adapter: an asyncio ``BufferedProtocol`` around one ``ServerConnection``.

It owns only I/O: received bytes go straight into the core's frame buffer
(``get_buffer``/``buffer_updated``, so a big frame is read into its own buffer with no extra
copy); the core's intents are carried out on the asyncio transport. Responses go through an
``Outbox`` (sendfile of large stored ranges on plain TCP); the transport's write-buffer
limits drive the core's back-pressure (``pause_writing``/``resume_writing``). Everything
else (framing, order, errors, session, migration state) is the core's
(``lurcher.core.connection.server``). A connection the core closes for a refused frame
lingers (``_linger``, plain TCP and Unix sockets): its answer is sent and its writing side
shut (the client sees the end at once), then what the client still sends is read into one
small scratch buffer and dropped, until the client closes, nothing came for
``LINGER_QUIET_S``, ``LINGER_S`` passed or ``LINGER_MAX_BYTES`` came; then it is closed.
Closed at once instead, a client still writing the rest of a refused frame (Iggy's clients
write a whole frame before they read) got a reset that discarded the answer: it saw
"connection reset" instead of InvalidCommand. TLS needs none of it: its close (close_notify,
bounded by the SSL shutdown timeout) reads on until the client answers. Given a
``ConnectionCap`` (``transports.admission``), a connection counts in it from
``connection_made`` to ``connection_lost`` (a migration away ends with the latter too), and
one beyond it is closed at once. Background tasks of the transports (``run_tracked``) are
held until done and an unexpected error in one is logged.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from lurcher.auth.session import Session
from lurcher.core.connection.server import CLOSE_REFUSED, ServerConnection
from lurcher.transports.admission import ConnectionCap
from lurcher.transports.sendfile import WRITE_HIGH_WATER_BYTES, WRITE_LOW_WATER_BYTES, Outbox

log = logging.getLogger(__name__)

# A poll answer of a typical batch (1 MB) fits the kernel's send buffer, so sendfile hands
# it over in one call instead of stopping half-way.
SEND_BUFFER_BYTES = 4 * 1024 * 1024
# A connection closed for a refused frame reads and drops what the client still sends for
# at most this long, and at most this much (then it is closed as before).
LINGER_S = 2.0
LINGER_QUIET_S = 0.25  # ... and closes once nothing came for this long
LINGER_MAX_BYTES = 256 * 1024 * 1024
LINGER_SCRATCH_BYTES = 64 * 1024


def peer_address(peer: Any) -> str:
    """``host:port`` of a peer address tuple ("unknown" without one)."""
    return f"{peer[0]}:{peer[1]}" if peer else "unknown"


def settle_soon(core: ServerConnection, pending: Any) -> None:
    """Carry out the core's ``wait`` intent on the running event loop: a future's outcome
    (a send's reply is the future of its write) is fed back by a done callback, with no task
    per request; anything else awaitable is awaited by a (tracked) task running
    ``core.settle``. A cancelled reply is answered with an error (``reply_cancelled``)."""
    if asyncio.isfuture(pending):
        pending.add_done_callback(lambda done: _settled(core, done))
    else:
        run_tracked(core.settle(pending), "settling a reply")


# Background tasks of the transports: the event loop keeps only weak references to tasks,
# so each is held here until it is done.
_background: set[asyncio.Task] = set()


def run_tracked(coro: Any, what: str) -> asyncio.Task:
    """Run ``coro`` as a task that is kept referenced until done; an unexpected exception
    is logged (with ``what``) instead of surfacing as "Task exception was never retrieved"."""
    task = asyncio.ensure_future(coro)
    _background.add(task)
    task.add_done_callback(lambda done: _task_done(done, what))
    return task


def _task_done(task: asyncio.Task, what: str) -> None:
    _background.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("%s failed", what, exc_info=task.exception())


def _settled(core: ServerConnection, future: asyncio.Future) -> None:
    if future.cancelled():  # e.g. the server is stopping: answer it, the connection goes on
        core.reply_cancelled()
        return
    exc = future.exception()
    if exc is None:
        core.reply_ready(future.result())
    elif isinstance(exc, Exception):
        core.reply_failed(exc)


class StreamConnection(asyncio.BufferedProtocol):
    """asyncio protocol for TCP (plain or TLS) carrying Iggy binary frames."""

    def __init__(self, shard: Any, transport_kind: int, session: Session | None = None,
                 pending: bytes = b"", cap: ConnectionCap | None = None,
                 accepted_us: int | None = None) -> None:
        """``session`` and ``pending`` restore a connection migrated from another shard;
        ``cap``: the listeners' connection count, this one refused beyond it;
        ``accepted_us``: when the listener accepted it (its login deadline runs from then,
        the TLS handshake included; None: once it is made)."""
        self.core = ServerConnection(shard, transport_kind, self, session, pending,
                                     accepted_us=accepted_us)
        self.cap = cap
        self.counted = False  # in cap's count until connection_lost
        self.transport: asyncio.Transport | None = None
        self.outbox: Outbox | None = None
        self.sendfile_fd: int | None = None
        self.linger_timer: asyncio.TimerHandle | None = None
        self.lingered_bytes = 0
        self.linger_ends = self.last_heard = 0.0  # loop times, while lingering
        # asyncio calls these straight into the core: no extra call per read
        self.get_buffer = lambda sizehint, take=self.core.reader.get_buffer: take()
        self.buffer_updated = self.core.buffer_updated

    # -- asyncio protocol: events into the core ---------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self.admitted():
            transport.close()  # beyond the cap: no session, nothing read
            return
        transport.set_write_buffer_limits(WRITE_HIGH_WATER_BYTES, WRITE_LOW_WATER_BYTES)
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self.sendfile_fd = sock.fileno()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        self.outbox = Outbox(transport, self.sendfile_fd)
        self.core.open(peer_address(transport.get_extra_info("peername")))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.counted = False
            self.cap.release()
        if self.outbox is not None:
            self.outbox.clear()
        if self.linger_timer is not None:
            self.linger_timer.cancel()
        self.core.connection_lost()

    def admitted(self) -> bool:
        """Count this connection in ``cap``: False (not counted) when it is beyond it; a
        connection migrated from another shard (its session came with it) always stays."""
        if self.cap is None:
            return True
        if self.core.session is not None:
            self.cap.adopt()
        elif not self.cap.admit():
            return False
        self.counted = True
        return True

    def get_buffer(self, sizehint: int) -> memoryview:  # replaced per instance in __init__
        return self.core.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:  # replaced per instance in __init__
        self.core.buffer_updated(nbytes)

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        self.outbox.paused = True
        self.core.pause_writing()

    def resume_writing(self) -> None:
        self.outbox.paused = False
        self.flush_outbox()
        if not self.outbox.paused:  # flushing may have filled the transport again
            self.core.resume_writing()

    # -- intents of the core ------------------------------------------------------------
    def write(self, parts: list[Any]) -> None:
        try:
            self.outbox.add(parts)
        except (OSError, EOFError) as exc:
            self.drop(exc)

    def wait(self, pending: Any) -> None:
        settle_soon(self.core, pending)

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def close(self, reason: str) -> None:
        """Close after the transport's buffer is flushed (queued file ranges are dropped);
        after a refused frame, linger first (module doc)."""
        if self.transport is None:
            return
        self.outbox.clear()
        if reason == CLOSE_REFUSED and self.transport.can_write_eof() and \
                not self.transport.is_closing():
            self._linger()
        else:
            self.transport.close()

    def _linger(self) -> None:
        """Shut the writing side once the answer is sent; read and drop what comes until the
        client closes (``eof_received``), is quiet for ``LINGER_QUIET_S``, ``LINGER_S``
        passed or ``LINGER_MAX_BYTES`` came; then close."""
        scratch = memoryview(bytearray(LINGER_SCRATCH_BYTES))
        self.get_buffer = lambda sizehint: scratch
        self.buffer_updated = self._dropped
        self.transport.set_protocol(self)  # uvloop keeps the two methods it was given
        loop = asyncio.get_running_loop()
        self.last_heard = loop.time()
        self.linger_ends = self.last_heard + LINGER_S
        self.linger_timer = loop.call_later(min(LINGER_QUIET_S, LINGER_S), self._linger_check)
        try:
            self.transport.write_eof()
        except OSError:  # reset by the client meanwhile (ENOTCONN): nothing to linger for
            self.transport.abort()
            return
        self.transport.resume_reading()  # the core may have paused it (back-pressure)

    def _dropped(self, nbytes: int) -> None:
        self.lingered_bytes += nbytes
        self.last_heard = asyncio.get_running_loop().time()
        if self.lingered_bytes > LINGER_MAX_BYTES:
            self._end_linger()

    def _end_linger(self) -> None:
        """Close; drop the connection instead when its answer is still unsent (a client
        that does not read would hold the close open)."""
        if self.transport.get_write_buffer_size():
            self.transport.abort()
        else:
            self.transport.close()

    def _linger_check(self) -> None:
        """Close once the client was quiet long enough or the lingering time is up; else
        look again when the quiet time would be reached."""
        now = asyncio.get_running_loop().time()
        quiet_at = self.last_heard + LINGER_QUIET_S
        if now >= quiet_at or now >= self.linger_ends:
            self._end_linger()
            return
        self.linger_timer = asyncio.get_running_loop().call_at(
            min(quiet_at, self.linger_ends), self._linger_check)

    def abort(self) -> None:
        self.transport.abort()

    def can_migrate(self) -> bool:
        """Plain TCP (not TLS) with no response queued."""
        return self.sendfile_fd is not None and not self.outbox

    def migrate(self, shard_id: int, session: Session, pending: bytes) -> bool:
        if not self.can_migrate() or self.transport.get_write_buffer_size():
            return False
        migration = self.core.shard.cluster.migration
        return migration.hand_over(shard_id, self.sendfile_fd, session, pending)

    # -- output -------------------------------------------------------------------------
    def flush_outbox(self) -> None:
        try:
            self.outbox.pump()
        except (OSError, EOFError) as exc:
            self.drop(exc)

    def drop(self, exc: BaseException) -> None:
        """A response cannot be completed: the framing is lost, drop the connection."""
        session = self.core.session
        log.warning("dropping connection %s: %s", session.address if session else "?", exc)
        self.core.closing = True
        self.outbox.clear()
        self.transport.abort()
