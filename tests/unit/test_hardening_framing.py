"""Fuzz: every transport's request framing yields what a one-shot parse of the bytes yields.

The same byte string, cut into arbitrary chunks, goes through the three ways bytes reach the
shared ``FrameReader``: TCP (``get_buffer``/``buffer_updated``, a chunk larger than the
offered buffer is delivered over several reads, as a socket would), WebSocket (``feed`` of
whole messages) and QUIC (``StreamRequests`` of one stream, the end of the stream with the
last chunk). The TCP and WebSocket adapters are also driven whole, in-process (fake
transport / fake WebSocket, an echoing shard): their replies are those of the one-shot
parse, in order, and nothing is answered after a fatal refusal. The oracle is ``reference_parse``, written from the frame rules (wire §1.1 and
``FrameLimits``) independently of the reader. Payloads beyond the small-frame buffer
(> 128 KiB) are generated often, since that is where the WebSocket freeze of issue 14 was.
"""

from __future__ import annotations

import asyncio
import random
import struct
import threading
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.connection.framing import BIG_FIRST_BYTES, BadFrame, Frame, FrameLimits, FrameReader
from lurcher.transports.quic import StreamRequests
from lurcher.transports.connection import StreamConnection
from lurcher.transports.websocket import WebSocketClient

KIB = 1024
MIB = 1024 * KIB
LIMITS = FrameLimits(max_control=200 * KIB, max_send=600 * KIB, max_unauthenticated=64 * KIB)
SEND = 101
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- the oracle

def reference_parse(data: bytes, limits: FrameLimits, authenticated: bool) -> list:
    """Frames as (code, payload) and refusals as ("bad", status, fatal), in order."""
    out, pos = [], 0
    while len(data) - pos >= 8:
        length, code = struct.unpack_from("<II", data, pos)
        if length < 4:
            out.append(("bad", ErrorCode.INVALID_COMMAND, False))
            pos += 8
            continue
        size = length - 4
        if not authenticated:
            limit, status = limits.max_unauthenticated, ErrorCode.UNAUTHENTICATED
        else:
            limit = limits.max_send if code == SEND else limits.max_control
            status = ErrorCode.INVALID_COMMAND
        if size > limit:
            out.append(("bad", status, True))
            return out
        if pos + 8 + size > len(data):
            return out
        out.append((code, data[pos + 8:pos + 8 + size]))
        pos += 8 + size
    return out


def as_item(item: Frame | BadFrame):
    if isinstance(item, BadFrame):
        return ("bad", item.status, item.fatal)
    return (item.code, bytes(item.payload))


def drain(reader: FrameReader) -> list:
    out = []
    while (item := reader.next_frame()) is not None:
        out.append(as_item(item))
    return out


# ---------------------------------------------------------------- the three transports

def via_tcp(chunks: list[bytes], authenticated: bool) -> list:
    reader = FrameReader(LIMITS, lambda: authenticated)
    out = []
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            target = reader.get_buffer()
            assert len(target) > 0, "get_buffer offered no room"
            n = min(len(target), len(view))
            target[:n] = view[:n]
            reader.buffer_updated(n)
            view = view[n:]
            out += drain(reader)
    return out


def via_websocket(chunks: list[bytes], authenticated: bool) -> list:
    reader = FrameReader(LIMITS, lambda: authenticated)
    out = []
    for chunk in chunks:
        reader.feed(chunk)
        out += drain(reader)
    return out


def via_quic(chunks: list[bytes], authenticated: bool) -> list:
    requests = StreamRequests(LIMITS, lambda: authenticated)
    out = []
    for i, chunk in enumerate(chunks):
        item = requests.data(4, chunk, end_stream=i == len(chunks) - 1)
        if item is not None:
            out.append(as_item(item))
    assert not requests.partial and not requests.answered, "a finished stream left state behind"
    return out


def quic_expectation(expected: list) -> list:
    """One request per stream: the first item, or InvalidCommand for a stream ending early."""
    return expected[:1] or [("bad", ErrorCode.INVALID_COMMAND, True)]


# ---------------------------------------------------------------- generated input

def frame(code: int, payload: bytes, length: int | None = None) -> bytes:
    return struct.pack("<II", len(payload) + 4 if length is None else length, code) + payload


@st.composite
def pieces(draw) -> bytes:
    kind = draw(st.sampled_from(["small", "small", "big", "garbage", "short", "huge"]))
    code = draw(st.sampled_from([1, 38, SEND, 200, 4242]))
    if kind == "small":
        return frame(code, draw(st.binary(max_size=300)))
    if kind == "big":  # beyond the small-frame buffer: its own growing buffer
        size = draw(st.integers(129 * KIB, 190 * KIB))
        return frame(draw(st.sampled_from([1, SEND])), random.Random(size).randbytes(size))
    if kind == "garbage":
        return draw(st.binary(min_size=1, max_size=40))
    if kind == "short":  # length < 4: refused, reading goes on
        return frame(code, b"", length=draw(st.integers(0, 3)))
    return frame(code, b"", length=draw(st.integers(700 * KIB, 2**32 - 1)))  # over every limit


@st.composite
def chunked(draw) -> tuple[bytes, list[bytes]]:
    data = b"".join(draw(st.lists(pieces(), min_size=1, max_size=6)))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=8)))
    bounds = [0, *cuts, len(data)]
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    return data, [c for c in chunks if c] or [data]


@FUZZ
@given(chunked(), st.booleans())
def test_tcp_reads_yield_the_one_shot_parse(case, authenticated):
    data, chunks = case
    assert via_tcp(chunks, authenticated) == reference_parse(data, LIMITS, authenticated)


@FUZZ
@given(chunked(), st.booleans())
def test_websocket_messages_yield_the_one_shot_parse(case, authenticated):
    data, chunks = case
    assert via_websocket(chunks, authenticated) == reference_parse(data, LIMITS, authenticated)


@FUZZ
@given(chunked(), st.booleans())
def test_quic_stream_yields_the_first_frame_of_the_one_shot_parse(case, authenticated):
    data, chunks = case
    expected = quic_expectation(reference_parse(data, LIMITS, authenticated))
    assert via_quic(chunks, authenticated) == expected


# ---------------------------------------------------------------- the adapters, whole

class EchoShard:
    """Just enough shard for an adapter: every request is answered with its payload."""

    def __init__(self, authenticated: bool) -> None:
        self.limits = SimpleNamespace(frames=LIMITS)
        self.dispatcher = SimpleNamespace(dispatch=lambda session, code, payload, conn:
                                          bytes(payload))
        self.authenticated = authenticated

    def open_session(self, address, kind, connection, accepted_us=None):
        return SimpleNamespace(address=address, authenticated=self.authenticated, closed=False)

    def close_session(self, session, migrated=False):
        session.closed = True


def replies(expected: list) -> list[bytes]:
    """The response frames the one-shot parse calls for, up to a fatal refusal."""
    out = []
    for item in expected:
        if item[0] == "bad":
            out.append(struct.pack("<II", item[1], 0))
        else:
            out.append(struct.pack("<II", 0, len(item[1])) + item[1])
    return out


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name, default=None):
        return default

    def set_write_buffer_limits(self, high, low):
        pass

    def get_write_buffer_size(self):
        return 0

    def write(self, data):
        self.written.append(bytes(data))

    def writelines(self, parts):  # asyncio's: the parts leave as one write
        self.write(b"".join(parts))

    def pause_reading(self):
        pass

    resume_reading = pause_reading

    def close(self):
        self.closed = True

    abort = close

    def can_write_eof(self):  # as TLS: a refused frame's close is not a lingering one
        return False          # (that: tests/integration/test_hardening_frames.py)


def via_tcp_adapter(chunks: list[bytes], authenticated: bool) -> tuple[bytes, bool]:
    conn, transport = StreamConnection(EchoShard(authenticated), 1), FakeTransport()
    conn.connection_made(transport)
    for chunk in chunks:
        view = memoryview(chunk)
        while view and not transport.closed:
            target = conn.get_buffer(-1)
            n = min(len(target), len(view))
            target[:n] = view[:n]
            conn.buffer_updated(n)
            view = view[n:]
    return b"".join(transport.written), transport.closed


class FakeWebSocket:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.sent: list[bytes] = []
        self.close_code = None
        self.protocol = SimpleNamespace(max_message_size=None)
        self.remote_address = ("127.0.0.1", 1)

    async def __aiter__(self):
        for chunk in self.chunks:
            yield chunk

    async def send(self, message):
        self.sent.append(message)

    async def close(self, code, reason):
        self.close_code = code


def via_websocket_adapter(chunks: list[bytes], authenticated: bool) -> tuple[list, int | None]:
    ws = FakeWebSocket(chunks)
    asyncio.run(WebSocketClient(EchoShard(authenticated), ws, 64 * MIB).serve())
    return ws.sent, ws.close_code


def fatal(expected: list) -> bool:
    return bool(expected) and expected[-1][0] == "bad" and expected[-1][2]


@FUZZ
@given(chunked(), st.booleans())
def test_tcp_adapter_answers_the_one_shot_parse(case, authenticated):
    data, chunks = case
    expected = reference_parse(data, LIMITS, authenticated)
    assert via_tcp_adapter(chunks, authenticated) == (b"".join(replies(expected)),
                                                       fatal(expected))


@FUZZ
@given(chunked(), st.booleans())
def test_websocket_adapter_answers_the_one_shot_parse(case, authenticated):
    data, chunks = case
    expected = reference_parse(data, LIMITS, authenticated)
    assert via_websocket_adapter(chunks, authenticated) == (replies(expected),
                                                            1008 if fatal(expected) else None)


# ---------------------------------------------------------------- the regression itself

def finishes(fn, timeout_s: float = 20.0):
    """Run ``fn`` in a thread; its result, or AssertionError if it never returns."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    worker.start()
    worker.join(timeout_s)
    assert not worker.is_alive(), "the reader loops forever"
    return result[0]


def test_big_frame_split_across_messages_with_the_next_frame_behind_it():
    """Issue 14 point 1: > 128 KiB frame in two WebSocket messages, the second also carrying
    the first bytes of the next frame."""
    big = frame(1, bytes(200 * KIB))
    nxt = frame(1, b"ping")
    chunks = [big[:1000], big[1000:] + nxt[:3], nxt[3:]]
    got = finishes(lambda: via_websocket(chunks, True))
    assert got == [(1, bytes(200 * KIB)), (1, b"ping")]


def test_an_announced_length_costs_nothing_until_bytes_arrive():
    """Issue 14 point 2: a 1 GiB announcement holds a buffer about the size of what arrived
    (it grows in doubling steps from BIG_FIRST_BYTES, 4 MiB), not 1 GiB."""
    reader = FrameReader(FrameLimits(10 * KIB, 2**30, 64 * KIB))
    reader.feed(struct.pack("<II", 2**30 + 4, SEND) + b"x" * 100)
    assert reader.next_frame() is None
    assert len(reader.big) <= BIG_FIRST_BYTES <= 4 * MIB and len(reader.buf) <= 4 * KIB
    reader.feed(b"y" * 3 * 1024 * KIB)
    assert reader.next_frame() is None
    assert len(reader.big) <= 4 * 1024 * KIB


def test_before_login_a_large_frame_is_refused_as_unauthenticated():
    reader = FrameReader(LIMITS, lambda: False)
    reader.feed(struct.pack("<II", 2**30 + 4, SEND))
    bad = reader.next_frame()
    assert isinstance(bad, BadFrame) and bad.fatal and bad.status == ErrorCode.UNAUTHENTICATED
    assert reader.big is None
