"""The sans-IO connection core (``lurcher.core.connection.server``), driven with no sockets:
bytes and events in, the intents it asks of its adapter out (h11-style tests)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from lurcher.core.connection.intents import MigrateTo
from lurcher.core.connection.framing import INITIAL_BUFFER_BYTES, Frame, FrameLimits
from lurcher.core.connection.server import (
    CLOSE_DISCONNECTED, CLOSE_REFUSED, FrameQueue, ServerConnection,
)
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

LIMITS = FrameLimits(max_control=1024, max_send=128 * 1024, max_unauthenticated=256)
PING, SEND, FAIL, BOOM, SLOW, MOVE = 1, 101, 7, 8, 9, 10


def frame(code: int, payload: bytes = b"") -> bytes:
    return struct.pack("<II", len(payload) + 4, code) + payload


class Later:
    """An awaitable the test completes by hand (the adapter's ``wait`` just records it)."""

    def __await__(self):  # pragma: no cover - never awaited here
        yield


class FakeShard:
    def __init__(self, authenticated: bool = True) -> None:
        self.limits = SimpleNamespace(frames=LIMITS)
        self.dispatcher = SimpleNamespace(dispatch=self.dispatch)
        self.opened: list[Any] = []
        self.closed: list[tuple[Any, bool]] = []
        self.resumed: list[Any] = []
        self.authenticated = authenticated
        self.awaited: list[memoryview] = []  # payloads of SLOW requests, as a handler keeps them

    def open_session(self, address: str, kind: int, connection: Any,
                     accepted_us: int | None = None) -> Any:
        session = SimpleNamespace(address=address, authenticated=self.authenticated,
                                  closed=False)
        self.opened.append((session, connection))
        return session

    def resume_session(self, session: Any, connection: Any) -> None:
        self.resumed.append(session)

    def close_session(self, session: Any, migrated: bool = False) -> None:
        session.closed = True
        self.closed.append((session, migrated))

    def dispatch(self, session: Any, code: int, payload: memoryview, connection: Any) -> Any:
        if code == FAIL:
            raise IggyError(ErrorCode.TOPIC_ID_NOT_FOUND)
        if code == BOOM:
            raise RuntimeError("bug")
        if code == SLOW:
            self.awaited.append(payload)
            return Later()
        if code in (MOVE, SEND):  # a SEND starting with "s" is forwarded asynchronously
            slow = code == SEND and payload[:1] == b"s"
            return MigrateTo(3, Later if slow else lambda: b"forwarded")
        return bytes(payload)


class RecordingIO:
    """An adapter that records every intent."""

    def __init__(self) -> None:
        self.intents: list[tuple] = []
        self.waiting: list[Any] = []
        self.accept_migration = True

    def write(self, parts: list[Any]) -> None:
        self.intents.append(("write", b"".join(bytes(p) for p in parts)))

    def wait(self, pending: Any) -> None:
        self.waiting.append(pending)
        self.intents.append(("wait",))

    def pause_reading(self) -> None:
        self.intents.append(("pause",))

    def resume_reading(self) -> None:
        self.intents.append(("resume",))

    def close(self, reason: str) -> None:
        self.intents.append(("close", reason))

    def abort(self) -> None:
        self.intents.append(("abort",))

    def can_migrate(self) -> bool:
        return True

    def migrate(self, shard_id: int, session: Any, pending: bytes) -> bool:
        self.intents.append(("migrate", shard_id, pending))
        return self.accept_migration

    def writes(self) -> list[bytes]:
        return [i[1] for i in self.intents if i[0] == "write"]


def ok(payload: bytes = b"") -> bytes:
    return struct.pack("<II", 0, len(payload)) + payload


def error(status: int) -> bytes:
    return struct.pack("<II", status, 0)


def connection(authenticated: bool = True) -> tuple[ServerConnection, RecordingIO, FakeShard]:
    shard, io = FakeShard(authenticated), RecordingIO()
    conn = ServerConnection(shard, 1, io)
    conn.open("1.2.3.4:5")
    return conn, io, shard


def test_open_registers_the_session_with_the_core_as_connection():
    conn, _io, shard = connection()
    assert shard.opened == [(conn.session, conn)]
    assert conn.session.address == "1.2.3.4:5"


def test_pipelined_requests_are_answered_in_order_in_any_chunking():
    data = frame(PING, b"a") + frame(PING, b"bc") + frame(PING)
    for cut in range(len(data) + 1):
        conn, io, _ = connection()
        conn.receive_data(data[:cut])
        conn.receive_data(data[cut:])
        assert io.writes() == [ok(b"a"), ok(b"bc"), ok()]


def test_get_buffer_path_reads_into_the_frame_buffer():
    conn, io, _ = connection()
    data = frame(PING, b"x" * 300)
    buf = conn.get_buffer()
    buf[:len(data)] = data
    conn.buffer_updated(len(data))
    assert io.writes() == [ok(b"x" * 300)]


def test_failures_map_to_their_status_and_other_exceptions_to_error():
    conn, io, _ = connection()
    conn.receive_data(frame(FAIL) + frame(BOOM) + frame(PING, b"z"))
    assert io.writes() == [error(ErrorCode.TOPIC_ID_NOT_FOUND), error(ErrorCode.ERROR), ok(b"z")]


def test_an_awaited_reply_holds_back_later_requests():
    conn, io, _ = connection()
    conn.receive_data(frame(SLOW) + frame(PING, b"after"))
    assert io.writes() == [] and io.intents == [("pause",), ("wait",)]
    conn.receive_data(frame(PING, b"more"))
    assert io.writes() == []
    conn.reply_ready(b"slow")
    assert io.writes() == [ok(b"slow"), ok(b"after"), ok(b"more")]
    assert ("resume",) in io.intents


def test_a_client_that_waits_for_each_answer_costs_no_pause_or_resume():
    conn, io, _ = connection()
    for n in range(3):
        conn.receive_data(frame(SLOW, b"s%d" % n))
        conn.reply_ready(b"r%d" % n)
    assert [i for i in io.intents if i[0] != "write"] == [("wait",)] * 3
    assert io.writes() == [ok(b"r0"), ok(b"r1"), ok(b"r2")]


def read_in(conn: ServerConnection, data: bytes) -> None:
    """``data`` arrives as the event loop reads it (``get_buffer``/``buffer_updated``)."""
    view = memoryview(data)
    while view:
        target = conn.get_buffer()
        n = min(len(target), len(view))
        target[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]


def test_input_behind_an_awaited_reply_pauses_reading_once_and_spares_its_payload():
    conn, io, shard = connection()
    pings = [b"%04d" % n * 250 for n in range(10)]  # grow the buffer past its first size
    read_in(conn, b"".join(frame(PING, p) for p in pings))
    assert len(conn.reader.buf) > INITIAL_BUFFER_BYTES
    read_in(conn, frame(SLOW, b"A" * 300))
    assert [i for i in io.intents if i[0] != "write"] == [("wait",)]
    read_in(conn, frame(PING, b"B" * 300))  # lands where the held frame was read
    read_in(conn, frame(PING, b"C"))
    assert bytes(shard.awaited[0]) == b"A" * 300 and io.writes() == [ok(p) for p in pings]
    assert [i for i in io.intents if i[0] != "write"] == [("wait",), ("pause",)]
    assert len(conn.reader.buf) == INITIAL_BUFFER_BYTES  # what the second buffer costs
    conn.reply_ready(b"done")
    assert io.writes() == [ok(p) for p in pings] + [ok(b"done"), ok(b"B" * 300), ok(b"C")]
    assert [i for i in io.intents if i[0] != "write"] == [("wait",), ("pause",), ("resume",)]


def test_the_second_buffer_stays_small_after_a_read_that_filled_the_first():
    conn, io, shard = connection()
    pings = [b"p" * 1016] * 3
    first_read = b"".join(frame(PING, p) for p in pings) + frame(SLOW, b"A" * 1016)
    assert len(first_read) == len(conn.reader.buf) == INITIAL_BUFFER_BYTES  # filled whole
    read_in(conn, first_read)
    read_in(conn, frame(PING, b"B"))
    assert bytes(shard.awaited[0]) == b"A" * 1016
    assert len(conn.reader.buf) == INITIAL_BUFFER_BYTES
    conn.reply_ready(b"done")
    assert io.writes() == [ok(p) for p in pings] + [ok(b"done"), ok(b"B")]


def test_a_pipelining_client_keeps_reading_paused_across_its_awaited_requests():
    conn, io, _ = connection()
    conn.receive_data(frame(SLOW, b"1") + frame(SLOW, b"2") + frame(PING, b"3"))
    conn.reply_ready(b"r1")
    assert [i for i in io.intents if i[0] != "write"] == [("pause",), ("wait",), ("wait",)]
    conn.reply_ready(b"r2")
    assert io.writes() == [ok(b"r1"), ok(b"r2"), ok(b"3")]
    assert [i for i in io.intents if i[0] != "write"][3:] == [("resume",)]


def test_a_failed_awaited_reply_is_an_error_frame_and_reading_goes_on():
    conn, io, _ = connection()
    conn.receive_data(frame(SLOW) + frame(PING))
    conn.reply_failed(IggyError(ErrorCode.UNAUTHENTICATED))
    assert io.writes() == [error(ErrorCode.UNAUTHENTICATED), ok()]


def test_an_awaited_reply_whose_write_raises_still_frees_the_connection():
    for settle in (lambda conn: conn.reply_ready(b"slow"),
                   lambda conn: conn.reply_failed(IggyError(ErrorCode.UNAUTHENTICATED))):
        conn, io, _ = connection()
        conn.receive_data(frame(SLOW) + frame(PING, b"after"))
        plain_write = io.write

        def broken_once(parts: list[Any]) -> None:
            io.write = plain_write  # the transport's stream was gone (e.g. QUIC STOP_SENDING)
            raise RuntimeError("Cannot send data after the stream was reset")

        io.write = broken_once
        try:
            settle(conn)
        except RuntimeError:
            pass  # the adapter's bug surfaces, but the connection is not left busy
        assert not conn.busy and io.writes() == [ok(b"after")]


def test_no_request_is_handled_while_output_is_paused():
    conn, io, _ = connection()
    conn.pause_writing()
    conn.receive_data(frame(PING, b"1"))
    assert io.writes() == [] and io.intents[-1] == ("pause",)
    conn.resume_writing()
    assert io.writes() == [ok(b"1")] and ("resume",) in io.intents


def test_length_below_four_is_refused_and_reading_goes_on():
    conn, io, _ = connection()
    conn.receive_data(struct.pack("<II", 2, PING) + frame(PING))
    assert io.writes() == [error(ErrorCode.INVALID_COMMAND), ok()]


def test_pre_login_limit_refuses_and_closes():
    conn, io, _ = connection(authenticated=False)
    conn.receive_data(frame(PING, b"x" * 257) + frame(PING))
    assert io.writes() == [error(ErrorCode.UNAUTHENTICATED)]
    assert io.intents[-1] == ("close", CLOSE_REFUSED)


def test_oversized_control_frame_after_login_is_fatal():
    conn, io, _ = connection()
    conn.receive_data(frame(PING, b"x" * 1025))
    assert io.writes() == [error(ErrorCode.INVALID_COMMAND)]
    assert io.intents[-1] == ("close", CLOSE_REFUSED)


def test_disconnect_writes_one_error_frame_then_closes_once():
    conn, io, _ = connection()
    conn.disconnect()
    conn.disconnect()
    assert io.writes() == [error(ErrorCode.DISCONNECTED)]
    assert [i for i in io.intents if i[0] == "close"] == [("close", CLOSE_DISCONNECTED)]


def test_connection_lost_closes_the_session_once_and_nothing_more_is_written():
    conn, io, shard = connection()
    conn.receive_data(frame(SLOW))
    conn.connection_lost()
    conn.connection_lost()
    conn.reply_ready(b"late")
    assert shard.closed == [(conn.session, False)]
    assert io.writes() == []


def test_migrate_to_hands_over_the_request_and_unhandled_bytes_and_answers_nothing():
    conn, io, shard = connection()
    conn.receive_data(frame(MOVE, b"m") + frame(PING) + b"\x09")
    assert io.writes() == []
    assert io.intents == [("migrate", 3, frame(MOVE, b"m") + frame(PING) + b"\x09"),
                          ("abort",)]
    assert shard.closed == [(conn.session, True)]


def test_migrate_to_that_cannot_move_answers_with_the_fallback():
    conn, io, shard = connection()
    io.accept_migration = False
    conn.receive_data(frame(MOVE) + frame(PING))
    assert io.writes() == [ok(b"forwarded"), ok()]
    assert shard.closed == []


def test_a_request_too_large_to_carry_is_forwarded_then_the_connection_moves():
    conn, io, _ = connection()
    big = b"x" * (70 * 1024)
    conn.receive_data(frame(SEND, big))
    assert io.writes() == [ok(b"forwarded")]
    assert not [i for i in io.intents if i[0] == "migrate"] and conn.migrate_after == 3
    conn.migrate_after = None
    conn.receive_data(frame(SEND, b"s" + big) + b"\x01")
    assert conn.busy and conn.migrate_after == 3
    conn.reply_ready(b"slow")
    assert io.writes()[-1] == ok(b"slow")
    assert io.intents[-2:] == [("migrate", 3, b"\x01"), ("abort",)]


def test_detach_hands_the_session_over_without_closing_it():
    conn, io, shard = connection()
    conn.receive_data(frame(PING) + b"\x01\x02")
    assert conn.can_migrate and conn.reader.unhandled == b"\x01\x02"
    assert conn.current_frame_bytes() == frame(PING)
    conn.detach()
    conn.connection_lost()
    assert shard.closed == [(conn.session, True)]
    assert io.intents[-1] == ("abort",) and not conn.can_migrate


def test_a_migrated_connection_resumes_with_its_session_and_pending_bytes():
    shard, io = FakeShard(), RecordingIO()
    session = SimpleNamespace(address="a:1", authenticated=True, closed=False)
    conn = ServerConnection(shard, 1, io, session, frame(PING, b"p") + frame(PING))
    conn.open("ignored")
    assert shard.resumed == [session] and shard.opened == []
    assert io.writes() == [ok(b"p"), ok()]


def test_busy_or_paused_connection_cannot_migrate():
    conn, _io, _ = connection()
    conn.receive_data(frame(SLOW))
    assert not conn.can_migrate
    conn.reply_ready(None)
    assert conn.can_migrate
    conn.pause_writing()
    assert not conn.can_migrate


def test_stale_session_close_without_reason_closes_quietly():
    conn, io, _ = connection()
    conn.close()
    assert io.writes() == [] and io.intents == [("close", CLOSE_DISCONNECTED)]


def test_a_frame_queue_feeds_already_framed_requests_in_order():
    shard, io = FakeShard(), RecordingIO()
    queue = FrameQueue()
    conn = ServerConnection(shard, 1, io, frames=queue)
    conn.open("q:1")
    queue.append(Frame(SLOW, memoryview(b"")))
    queue.append(Frame(PING, memoryview(b"2")))
    conn.frames_ready()
    assert io.writes() == [] and len(queue) == 1
    conn.reply_ready(b"1")
    assert io.writes() == [ok(b"1"), ok(b"2")] and len(queue) == 0


def test_the_core_imports_neither_asyncio_nor_sockets():
    code = ("import sys, lurcher.core.connection.server, lurcher.core.connection.intents; "
            "print(sorted({'asyncio', 'socket'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "[]"


def test_a_cancelled_awaited_reply_is_an_error_frame_and_reading_goes_on():
    """A reply cancelled before it settled (awaited by ``settle`` or a future of the
    TCP adapter) is answered with an error and frees the connection for the next request."""
    import asyncio

    from lurcher.transports.connection import settle_soon

    async def cancelled_reply() -> Any:
        raise asyncio.CancelledError

    async def through_settle(conn: ServerConnection) -> None:
        try:
            await conn.settle(cancelled_reply())
        except asyncio.CancelledError:
            pass  # the cancellation still reaches the task that awaited it

    async def through_future(conn: ServerConnection) -> None:
        future = asyncio.get_running_loop().create_future()
        settle_soon(conn, future)
        future.cancel()
        await asyncio.sleep(0)  # done callbacks run on the next loop iteration

    for settle in (through_settle, through_future):
        conn, io, _ = connection()
        conn.receive_data(frame(SLOW) + frame(PING, b"after"))
        asyncio.run(settle(conn))
        assert not conn.busy and io.writes() == [error(ErrorCode.ERROR), ok(b"after")]
