"""One client connection over a byte stream, independent of the socket type.

Requests are handled strictly in order: frames are taken from the ``FrameReader`` and
dispatched one at a time; a handler that returns an awaitable pauses reading until it
completes, so a later request never overtakes an earlier one. Back-pressure: responses go
through an ``Outbox``; while the transport's write buffer is above its high-water mark
(``pause_writing`` .. ``resume_writing``) no further request is read or handled, so a client
that pipelines requests and never reads costs bounded memory. Failures become error
frames here and nowhere else. The session ends (and is removed from the shard) when the
connection is lost.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
from typing import Any

from lurcher.auth.session import Session
from lurcher.core.shard.reply import error_frame, ok_frame_parts
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.shard.cluster import MIGRATED
from lurcher.transports.framing import REQUEST_HEADER, BadFrame, Frame, FrameReader
from lurcher.transports.sendfile import WRITE_HIGH_WATER_BYTES, WRITE_LOW_WATER_BYTES, Outbox

log = logging.getLogger(__name__)

# A poll answer of a typical batch (1 MB) fits the kernel's send buffer, so sendfile hands
# it over in one call instead of stopping half-way.
SEND_BUFFER_BYTES = 4 * 1024 * 1024


class StreamConnection(asyncio.BufferedProtocol):
    """asyncio protocol for TCP (plain or TLS) carrying Iggy binary frames."""

    def __init__(self, shard: Any, transport_kind: int, session: Session | None = None,
                 pending: bytes = b"") -> None:
        """``session`` and ``pending`` restore a connection migrated from another shard."""
        self.shard = shard
        self.transport_kind = transport_kind
        self.reader = FrameReader(shard.limits.frames, self.authenticated)
        self.transport: asyncio.Transport | None = None
        self.outbox: Outbox | None = None
        self.write_paused = False
        self.session = session
        self.pending = pending
        self.busy = False
        self.closing = False
        self.migrated = False
        self.sendfile_fd: int | None = None
        self.current: Frame | None = None
        self.streak: tuple[int, int] = (-1, 0)  # (foreign shard, consecutive requests)
        self.migrate_after: int | None = None  # move to this shard once the reply is out

    # -- asyncio protocol -------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(WRITE_HIGH_WATER_BYTES, WRITE_LOW_WATER_BYTES)
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self.sendfile_fd = sock.fileno()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        self.outbox = Outbox(transport, self.sendfile_fd)
        if self.session is not None:
            self.shard.resume_session(self.session, self)
            self.reader.feed(self.pending)
            self.pending = b""
            self.process()
            return
        peer = transport.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self.session = self.shard.open_session(address, self.transport_kind, self)

    def authenticated(self) -> bool:
        return self.session is not None and self.session.authenticated

    @property
    def can_migrate(self) -> bool:
        """Plain TCP, nothing in flight: the socket can change process."""
        return (self.sendfile_fd is not None and not self.busy and not self.closing
                and not self.outbox and not self.write_paused)

    def current_frame_size(self) -> int:
        return len(self.current.payload) + REQUEST_HEADER.size + len(self.reader.unhandled)

    def current_frame_bytes(self) -> bytes:
        """The request being handled, as it arrived (carried along when migrating)."""
        frame = self.current
        return REQUEST_HEADER.pack(len(frame.payload) + 4, frame.code) + bytes(frame.payload)

    def detach(self) -> None:
        """The connection now lives in another shard: forget it here without closing the
        client's socket (the other process holds a duplicate of it)."""
        self.migrated = True
        self.closing = True
        self.shard.close_session(self.session, migrated=True)
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self.outbox is not None:
            self.outbox.clear()
        if self.session is not None and not self.migrated:
            self.shard.close_session(self.session)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.reader.buffer_updated(nbytes)
        if not self.busy:
            self.process()

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        """The client is not reading fast enough: stop reading its requests."""
        self.write_paused = self.outbox.paused = True
        self.update_reading()

    def resume_writing(self) -> None:
        self.write_paused = self.outbox.paused = False
        self.flush_outbox()
        self.update_reading()
        if not self.busy and not self.write_paused:
            self.process()

    def update_reading(self) -> None:
        """Read requests only while nothing is awaited and the client keeps up."""
        if self.closing:
            return
        if self.busy or self.write_paused:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    # -- request loop -----------------------------------------------------------
    def process(self) -> None:
        """Handle every complete frame; stop at the first that must be awaited."""
        while not self.closing and not self.write_paused:
            frame = self.reader.next_frame()
            if frame is None:
                return
            if isinstance(frame, BadFrame):
                self.refuse(frame)
                continue
            result = self.run(frame)
            if inspect.isawaitable(result):
                self.busy = True
                self.update_reading()
                asyncio.ensure_future(self.finish(result))
                return

    def run(self, frame: Frame) -> Any:
        """Dispatch one frame; write its response unless it must be awaited."""
        self.current = frame
        try:
            result = self.shard.dispatcher.dispatch(self.session, frame.code, frame.payload,
                                                    self)
        except IggyError as exc:
            self.fail(frame.code, exc)
            return None
        except Exception:
            log.exception("command %d failed", frame.code)
            self.write_error(ErrorCode.ERROR)
            return None
        if inspect.isawaitable(result):
            return self.await_reply(frame.code, result)
        if result is not MIGRATED:
            self.write_ok(result)
        return None

    async def await_reply(self, code: int, pending: Any) -> None:
        try:
            result = await pending
        except IggyError as exc:
            self.fail(code, exc)
            return
        except Exception:
            log.exception("command %d failed", code)
            self.write_error(ErrorCode.ERROR)
            return
        self.write_ok(result)

    async def finish(self, pending: Any) -> None:
        try:
            await pending
        finally:
            self.busy = False
            if self.migrate_after is not None and not self.closing:
                self.shard.cluster.migrate_after_reply(self)
            if not self.closing:
                self.update_reading()
                self.process()

    # -- responses --------------------------------------------------------------
    def write_ok(self, result: Any) -> None:
        if self.closing:
            return
        self.send(ok_frame_parts(result))

    def write_error(self, status: int) -> None:
        if not self.closing:
            self.send([error_frame(status)])

    def send(self, parts: list[Any]) -> None:
        try:
            self.outbox.add(parts)
        except (OSError, EOFError) as exc:
            self.abort(exc)

    def flush_outbox(self) -> None:
        try:
            self.outbox.pump()
        except (OSError, EOFError) as exc:
            self.abort(exc)

    def abort(self, exc: BaseException) -> None:
        """A response cannot be completed: the framing is lost, drop the connection."""
        log.warning("dropping connection %s: %s",
                    self.session.address if self.session else "?", exc)
        self.closing = True
        self.outbox.clear()
        self.transport.abort()

    def fail(self, code: int, exc: IggyError) -> None:
        log.debug("command %d -> %s", code, exc)
        self.write_error(exc.status)

    def refuse(self, frame: BadFrame) -> None:
        log.info("refusing frame from %s: %s", self.session.address if self.session else "?",
                 frame.detail)
        self.write_error(frame.status)
        if frame.fatal:
            self.close()

    def close(self) -> None:
        """Close after pending writes are flushed."""
        self.closing = True
        if self.transport is not None:
            self.outbox.clear()
            self.transport.close()

    def disconnect(self, status: int = ErrorCode.DISCONNECTED) -> None:
        """Server-initiated close (shutdown, deleted user): one error frame, then close."""
        self.write_error(status)
        self.close()
