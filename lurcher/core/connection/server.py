"""One client connection of a binary front end, as a sans-IO state machine (h11 style).

Events in (called by the adapter): ``open(address)``, received bytes (``get_buffer`` /
``buffer_updated`` for zero-copy reads, or ``receive_data``), ``reply_ready`` /
``reply_failed`` / ``reply_cancelled`` (the outcome of an awaited reply), ``pause_writing``
/ ``resume_writing`` (the adapter's output passed its high-water mark / drained),
``connection_lost``; the shard may call ``disconnect(status)``. Intents out: method calls on the
adapter (``ConnectionIO``): write these response parts (file slices left in, for sendfile),
await this reply, pause or resume reading, close after flushing, abort, hand the socket to
another shard (when a command's result is ``intents.MigrateTo``).

Invariants:

- requests are handled strictly in order: while a reply is awaited (``busy``) no further
  frame is taken, so a later request never overtakes an earlier one;
- back-pressure: while the adapter's output is paused no frame is taken either, and reading
  is paused; while a reply is awaited, reading is paused once input is pending (already
  there when the reply began to be awaited, or received since): a client that waits for its
  answers, as every Iggy client does, costs no pause and resume per awaited request (each
  an ``epoll_ctl`` change, which libuv makes through an io_uring: a system call), and what
  one that pipelines sends meanwhile is taken in only as far as the read under way (or, right
  after a TLS handshake, the bytes that came with it), into a buffer of the reader's own
  (``FrameReader.hold``), so the awaited frame's payload stays intact;
  ``pause_reading``/``resume_reading`` are asked only when that state changes;
- an awaited reply always finishes its request (answered, failed or cancelled: a cancelled
  one is answered ``ErrorCode.ERROR``), so the connection never stays busy;
- every failure becomes an error frame here (``failures.failure_status``) and nowhere else;
  a fatal refusal (``BadFrame.fatal``) is answered, then the connection is closed;
- the session is opened (or resumed, for a migrated connection, with the bytes it carried)
  by ``open`` and closed exactly once, by ``connection_lost`` (not when it migrated);
- a new session's login deadline runs from the connection's accept (``accepted_us``), not
  from ``open``: a TLS (or WebSocket) handshake before ``open`` is within it.

Per request on the synchronous path: one ``next_frame``, one ``dispatch``, one ``write``.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Protocol

from lurcher.auth.session import Session
from lurcher.core.connection.failures import failure_status
from lurcher.core.connection.framing import REQUEST_HEADER, BadFrame, Frame, FrameReader
from lurcher.core.connection.intents import MAX_CARRIED_BYTES, MigrateTo
from lurcher.core.shard.reply import error_frame, is_awaitable, ok_frame_parts
from lurcher.core.wire.error_codes import ErrorCode

log = logging.getLogger(__name__)

CLOSE_REFUSED = "refused"        # a fatal frame refusal
CLOSE_DISCONNECTED = "disconnected"  # server-initiated (shutdown, deleted user, stale)
MOVED = object()  # the connection was handed to another shard: answer nothing here


class ConnectionIO(Protocol):
    """The intents an adapter carries out for its ``ServerConnection``."""

    def write(self, parts: list[Any]) -> None:
        """Send one response (bytes-likes and file slices), in order after earlier ones."""

    def wait(self, pending: Any) -> None:
        """Await ``pending``, then call ``reply_ready(result)`` or ``reply_failed(exc)``
        (``ServerConnection.settle`` does both)."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self, reason: str) -> None:
        """Close once what was written is sent (``reason``: a ``CLOSE_*`` constant)."""

    def abort(self) -> None:
        """Drop the connection now, unsent output included."""

    def can_migrate(self) -> bool:
        """This transport's socket can change process and no response is queued."""

    def migrate(self, shard_id: int, session: Session, pending: bytes) -> bool:
        """Hand the socket, the session and ``pending`` (bytes to handle first) to shard
        ``shard_id``; False (nothing changed) when it cannot now."""


class FrameQueue:
    """Complete request frames handed over one by one (transports that frame per message,
    e.g. QUIC's one request per stream), taken by ``ServerConnection`` in order. Once
    ``serving`` (when given) turns False, no frame is taken any more and those waiting are
    dropped: a request that has not started when its connection closes never runs."""

    def __init__(self, serving: Callable[[], bool] | None = None) -> None:
        self.frames: deque[Frame] = deque()
        self.serving = serving

    def __len__(self) -> int:
        return len(self.frames)

    def append(self, frame: Frame) -> None:
        self.frames.append(frame)

    def has_pending(self) -> bool:
        return bool(self.frames)

    def hold(self) -> None:
        """Nothing to keep apart: each frame is its own bytes."""

    def release(self) -> None:
        """See ``hold``."""

    def next_frame(self) -> Frame | None:
        if not self.frames:
            return None
        if self.serving is not None and not self.serving():
            self.frames.clear()
            return None
        return self.frames.popleft()


class ServerConnection:
    """The state of one client connection (see module docstring)."""

    def __init__(self, shard: Any, transport_kind: int, io: ConnectionIO,
                 session: Session | None = None, pending: bytes = b"",
                 frames: FrameQueue | None = None, accepted_us: int | None = None) -> None:
        """``session`` and ``pending`` restore a connection migrated from another shard.
        ``frames``: requests already framed by the adapter (QUIC: one per stream) instead
        of a byte stream. ``accepted_us``: the shard's clock when the listener accepted the
        connection (None: at ``open``); the new session's login deadline runs from it, a
        TLS or WebSocket handshake included."""
        self.shard = shard
        self.accepted_us = accepted_us
        self.transport_kind = transport_kind
        self.io = io
        self.reader: Any = frames if frames is not None else FrameReader(
            shard.limits.frames, self.authenticated)
        self.session = session
        self.pending = pending
        self.busy = False          # a reply is awaited
        self.write_paused = False  # the adapter's output is above its high-water mark
        self.reading_paused = False  # the last of pause_reading/resume_reading asked
        self.closing = False
        self.aborted = False       # dropped without a graceful close (it is going at once)
        self.migrated = False
        self.current: Frame | None = None
        self.streak: tuple[int, int] = (-1, 0)  # (foreign shard, consecutive requests)
        self.migrate_after: int | None = None  # move to this shard once the reply is out

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, address: str) -> None:
        """The transport is up: open the session, or resume a migrated one."""
        if self.session is None:
            self.session = self.shard.open_session(address, self.transport_kind, self,
                                                   self.accepted_us)
            return
        self.shard.resume_session(self.session, self)
        pending, self.pending = self.pending, b""
        self.receive_data(pending)

    def connection_lost(self) -> None:
        """The transport is gone: close the session (once; not when it migrated)."""
        self.closing = True
        session = self.session
        if session is not None and not self.migrated and not session.closed:
            self.shard.close_session(session)

    def authenticated(self) -> bool:
        return self.session is not None and self.session.authenticated

    def disconnect(self, status: int = ErrorCode.DISCONNECTED) -> None:
        """Server-initiated close (shutdown, deleted user): one error frame, then close."""
        self.write_error(status)
        self.close(CLOSE_DISCONNECTED)

    def close(self, reason: str = CLOSE_DISCONNECTED) -> None:
        """Close once what was written is sent."""
        if not self.closing:
            self.closing = True
            self.io.close(reason)

    def abort(self) -> None:
        """Drop the connection now, unsent output included (a client that does not read
        would hold a graceful close open forever)."""
        self.closing = self.aborted = True
        self.io.abort()

    # -- input ---------------------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.reader.buffer_updated(nbytes)
        self.frames_ready()

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self.reader.feed(data)
        self.frames_ready()

    def frames_ready(self) -> None:
        """New input is in the reader (or the ``FrameQueue``): handle it, or, while a reply
        is awaited, stop reading until it is done."""
        if self.busy:
            self.update_reading()
        else:
            self.process()

    # -- back-pressure -------------------------------------------------------------------
    def pause_writing(self) -> None:
        """The client is not reading fast enough: stop reading its requests."""
        self.write_paused = True
        self.update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.update_reading()
        if not self.busy:
            self.process()

    def update_reading(self) -> None:
        """Read requests while the client keeps up and no input waits behind an awaited
        reply; the adapter is asked only when that changes."""
        if self.closing:
            return
        pause = self.write_paused or (self.busy and self.reader.has_pending())
        if pause == self.reading_paused:
            return
        self.reading_paused = pause
        if pause:
            self.io.pause_reading()
        else:
            self.io.resume_reading()

    # -- requests ------------------------------------------------------------------------
    def process(self) -> None:
        """Handle every complete frame; stop at the first whose reply must be awaited."""
        while not self.closing and not self.write_paused:
            frame = self.reader.next_frame()
            if frame is None:
                return
            if isinstance(frame, BadFrame):
                self.refuse(frame)
            elif self.run(frame):
                return

    def run(self, frame: Frame) -> bool:
        """Dispatch one frame; True when its reply is awaited (the connection is busy)."""
        self.current = frame
        try:
            result = self.shard.dispatcher.dispatch(self.session, frame.code, frame.payload,
                                                    self)
        except Exception as exc:
            self.write_error(failure_status(frame.code, exc))
            return False
        if result.__class__ is MigrateTo:
            result = self.migrate_or_fallback(result)
            if result is MOVED:
                return False
        if is_awaitable(result):
            self.busy = True
            self.reader.hold()
            self.update_reading()
            self.io.wait(result)
            return True
        self.write_ok(result)
        return False

    async def settle(self, pending: Any) -> None:
        """Await ``pending`` (a ``wait`` intent) and feed its outcome back in; adapters run
        this on their event loop."""
        try:
            result = await pending
        except Exception as exc:
            self.reply_failed(exc)
            return
        except BaseException:  # cancelled: answer it, then let the cancellation go on
            self.reply_cancelled()
            raise
        self.reply_ready(result)

    def reply_ready(self, result: Any) -> None:
        """The awaited reply of the current request; the request is finished even when the
        write raises (the connection must not stay busy)."""
        try:
            self.write_ok(result)
        finally:
            self.finish()

    def reply_failed(self, exc: BaseException) -> None:
        try:
            self.write_error(failure_status(self.current.code if self.current else "?", exc))
        finally:
            self.finish()

    def reply_cancelled(self) -> None:
        """The awaited reply was cancelled (e.g. the shard is stopping): answer an error so
        the client is not left waiting and the connection is not left busy."""
        log.info("reply to %s was cancelled", self.session.address if self.session else "?")
        try:
            self.write_error(ErrorCode.ERROR)
        finally:
            self.finish()

    def finish(self) -> None:
        self.busy = False
        self.reader.release()
        target, self.migrate_after = self.migrate_after, None
        if target is not None and not self.closing:
            self.hand_over(target, b"")  # stays (and will try again) when it cannot move
        if not self.closing:
            self.process()  # frames already read first: a pipelining client's next
            self.update_reading()  # awaited one keeps reading paused, with no flip

    def refuse(self, frame: BadFrame) -> None:
        log.info("refusing frame from %s: %s", self.session.address if self.session else "?",
                 frame.detail)
        self.write_error(frame.status)
        if frame.fatal:
            self.close(CLOSE_REFUSED)

    # -- output --------------------------------------------------------------------------
    def write_ok(self, result: Any) -> None:
        if not self.closing:
            self.io.write(ok_frame_parts(result))

    def write_error(self, status: int) -> None:
        if not self.closing:
            self.io.write([error_frame(status)])

    # -- migration ------------------------------------------------------------------------
    @property
    def can_migrate(self) -> bool:
        """Nothing in flight and a transport whose socket can change process now (read by
        the migration policy)."""
        return (not self.busy and not self.closing and not self.write_paused
                and self.io.can_migrate())

    def migrate_or_fallback(self, intent: MigrateTo) -> Any:
        """Move to ``intent.shard_id`` carrying the current request (``MOVED``), or the
        result of ``intent.fallback()``; a request too large to carry moves after it."""
        if self.current_frame_size() > MAX_CARRIED_BYTES:
            self.migrate_after = intent.shard_id
        elif self.hand_over(intent.shard_id, self.current_frame_bytes()):
            return MOVED
        return intent.fallback()

    def hand_over(self, shard_id: int, frame_bytes: bytes) -> bool:
        """Give the connection, with ``frame_bytes`` and what it has not handled, to
        ``shard_id``. False (nothing changed) when it cannot move now."""
        pending = frame_bytes + self.reader.unhandled
        if len(pending) > MAX_CARRIED_BYTES or not self.io.migrate(shard_id, self.session,
                                                                    pending):
            return False
        self.detach()
        return True

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
        self.io.abort()
