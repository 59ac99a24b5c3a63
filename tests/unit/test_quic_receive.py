"""The steady 1-RTT receive (``lurcher.core.quic_receive``): it mirrors the pinned aioquic
method, leaves the connection in the state aioquic's method leaves it in, drops duplicates
and damaged packets as aioquic does, closes on reserved bits, and hands any other datagram
(another address, a long header) to aioquic."""

from __future__ import annotations

import hashlib
import inspect
import os
from pathlib import Path

import pytest
from aioquic import tls
from aioquic.quic.rangeset import RangeSet
from hypothesis import given, settings
from hypothesis import strategies as st
from aioquic.buffer import Buffer, BufferReadError
from aioquic.quic.connection import (QuicConnection, QuicConnectionError, QuicConnectionState,
                                     QuicReceiveContext)
from aioquic.quic.events import StreamDataReceived
from aioquic.quic.packet import QuicErrorCode

from lurcher.core import quic_receive
from lurcher.core.quic import QuicSettings
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair, receive_state

# sha256 of aioquic 1.7.2's QuicConnection.receive_datagram, the method receive_steady mirrors
MIRRORED_METHOD = "3c7f29826050cbfe326c3a05400792ce8757bd0be07a2f41b6b1562f22588278"
SMALL = QuicSettings(initial_mtu=1200)


@pytest.fixture
def steady_receives(monkeypatch) -> list[bool]:
    """One entry per datagram received: whether the steady receive handled it."""
    calls: list[bool] = []  # the test clears it after the handshake
    real = quic_receive.receive_steady

    def spying(quic, data, addr, now) -> bool:
        calls.append(real(quic, data, addr, now))
        return calls[-1]
    monkeypatch.setattr("lurcher.core.quic_frames.receive_steady", spying)
    return calls


def _send(cq, stream_id: int, payload: bytes, now: float) -> list[bytes]:
    """The datagrams the client sends for ``payload`` on ``stream_id``."""
    cq.send_stream_data(stream_id, payload, end_stream=True)
    return [bytes(data) for data, _ in cq.datagrams_to_send(now)]


def _deliver(sq, datagrams: list[bytes], now: float, addr=CLIENT_ADDR) -> bytes:
    """Hand ``datagrams`` to the server; the stream bytes it delivered."""
    for data in datagrams:
        sq.receive_datagram(data, addr, now)
    got = bytearray()
    while (event := sq.next_event()) is not None:
        if isinstance(event, StreamDataReceived):
            got += event.data
    return bytes(got)


def _transfer(cq, sq, payloads: list[bytes], now: float) -> list[bytes]:
    """Send each payload on its own stream, rounds of data one way and ACKs the other,
    until it arrived (at most 200 rounds); what arrived."""
    arrived = []
    for payload in payloads:
        stream_id = cq.get_next_available_stream_id()
        cq.send_stream_data(stream_id, payload, end_stream=True)
        got = b""
        for _ in range(200):
            got += _deliver(sq, [bytes(d) for d, _ in cq.datagrams_to_send(now)], now)
            now += 0.01
            for data, _ in sq.datagrams_to_send(now):
                cq.receive_datagram(bytes(data), SERVER_ADDR, now)
            while cq.next_event() is not None:
                pass
            if len(got) >= len(payload):
                break
        arrived.append(got)
    return arrived


def test_the_method_it_mirrors_is_the_pinned_one() -> None:
    source = inspect.getsource(QuicConnection.receive_datagram)
    assert hashlib.sha256(source.encode()).hexdigest() == MIRRORED_METHOD, (
        "aioquic's receive_datagram changed: re-check lurcher/core/quic_receive.py")


def test_it_leaves_the_state_aioquics_method_leaves(tmp_path: Path, monkeypatch) -> None:
    """The same exchange through two connection pairs, one receiving through aioquic's
    method only: the data and every piece of receive state end up the same."""
    payloads = [os.urandom(n) for n in (70_000, 1, 5_000, 30_000)]
    lean_pair = connected_pair(tmp_path, SMALL, SMALL)
    plain_pair = connected_pair(tmp_path, SMALL, SMALL)
    lean = _transfer(lean_pair[0], lean_pair[1], payloads, 1.0)
    monkeypatch.setattr("lurcher.core.quic_frames.receive_steady", lambda *args: False)
    plain = _transfer(plain_pair[0], plain_pair[1], payloads, 1.0)
    assert lean == plain == payloads
    for lean_side, plain_side in zip(lean_pair[:2], plain_pair[:2]):
        assert receive_state(lean_side) == receive_state(plain_side)


def test_data_after_the_handshake_takes_the_steady_receive(tmp_path: Path,
                                                          steady_receives) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    steady_receives.clear()
    payload = os.urandom(100_000)
    assert _transfer(cq, sq, [payload], 1.0) == [payload]
    assert steady_receives.count(True) >= 80  # about 85 datagrams of 1,200 B


def test_a_replayed_datagram_is_dropped_as_a_duplicate(tmp_path: Path,
                                                       steady_receives) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    steady_receives.clear()
    datagrams = _send(cq, cq.get_next_available_stream_id(), os.urandom(5_000), 1.0)
    _deliver(sq, datagrams, 1.0)
    sq.datagrams_to_send(1.0)  # the ACK goes out: nothing is waiting to be acknowledged
    before = receive_state(sq)
    assert _deliver(sq, [datagrams[0]], 1.5) == b""
    assert steady_receives[-1] is True
    assert receive_state(sq) == before  # not recorded, no ACK scheduled, timer not re-armed


def test_a_damaged_datagram_changes_nothing_and_the_connection_goes_on(
        tmp_path: Path, steady_receives) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    steady_receives.clear()
    payload = os.urandom(3_000)
    datagrams = _send(cq, cq.get_next_available_stream_id(), payload, 1.0)
    damaged = bytearray(datagrams[0])
    damaged[-1] ^= 0x01  # the AEAD tag
    before = receive_state(sq)
    assert _deliver(sq, [bytes(damaged)], 1.0) == b""
    assert steady_receives[-1] is False  # aioquic's method dropped it
    assert receive_state(sq) == before
    assert _deliver(sq, datagrams, 1.0) == payload


def test_reserved_bits_close_the_connection(tmp_path: Path, steady_receives) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    steady_receives.clear()
    crypto = cq._cryptos[tls.Epoch.ONE_RTT]
    packet_number = cq._packet_number
    cq._packet_number += 1
    header = (bytes([0x40 | 0x08 | crypto.send.key_phase << 2 | 0x01]) + cq._peer_cid.cid
              + (packet_number & 0xFFFF).to_bytes(2, "big"))
    packet = crypto.encrypt_packet(header, b"\x01" + bytes(20), packet_number)  # PING
    sq.receive_datagram(packet, CLIENT_ADDR, 1.0)
    assert steady_receives[-1] is True
    assert sq._close_event.error_code == QuicErrorCode.PROTOCOL_VIOLATION
    assert sq._close_event.reason_phrase == "Reserved bits must be zero"


def test_a_datagram_from_another_address_goes_through_aioquic(tmp_path: Path,
                                                              steady_receives) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    steady_receives.clear()
    payload = os.urandom(2_000)
    datagrams = _send(cq, cq.get_next_available_stream_id(), payload, 1.0)
    assert _deliver(sq, datagrams, 1.0, addr=("127.0.0.1", 3)) == payload
    assert steady_receives and not any(steady_receives)
    assert len(sq._network_paths) == 2  # aioquic took note of the new path
    assert sq._state == QuicConnectionState.CONNECTED


def test_only_a_short_header_first_byte_qualifies():
    is_short_header = quic_receive.is_short_header
    assert is_short_header(b"\x40rest") and is_short_header(bytes([0x5F]))
    assert not is_short_header(b"\xc0rest")  # long header
    assert not is_short_header(b"\x00rest")  # fixed bit clear
    assert not is_short_header(b"")


def _stream_frame(frame_type: int, stream_id: int, data: bytes, offset: int = 0,
                  length: int | None = None) -> bytes:
    """A STREAM frame (``length``: the length field written, default the data's)."""
    buf = Buffer(capacity=len(data) + 32)
    buf.push_uint_var(frame_type)
    buf.push_uint_var(stream_id)
    if frame_type & 4:
        buf.push_uint_var(offset)
    if frame_type & 2:
        buf.push_uint_var(len(data) if length is None else length)
    buf.push_bytes(data)
    return buf.data


CLIENT_BIDI, SERVER_UNI = 0, 3
HANDLED = (True, False)  # ACK-eliciting, not probing
BAD_ENCODING, BAD_STREAM = QuicErrorCode.FRAME_ENCODING_ERROR, QuicErrorCode.STREAM_STATE_ERROR
PAYLOADS = {  # name: (payload, what receiving it answers or the error code it raises)
    "one frame with its length": (_stream_frame(0x0A, CLIENT_BIDI, b"a" * 900), HANDLED),
    "one frame to the end, offset and fin": (_stream_frame(0x0D, CLIENT_BIDI, b"b" * 50, 7),
                                              HANDLED),
    "then PING and PADDING": (_stream_frame(0x0E, CLIENT_BIDI, b"c" * 40, 3) + b"\x01\x00\x00",
                              HANDLED),
    "then a second STREAM frame": (_stream_frame(0x0A, CLIENT_BIDI, b"d" * 10)
                                   + _stream_frame(0x0F, 4, b"e" * 5, 2), HANDLED),
    "a length past the end": (_stream_frame(0x0A, CLIENT_BIDI, b"f" * 10, length=100),
                              BAD_ENCODING),
    "a stream the client may not send on": (_stream_frame(0x0A, SERVER_UNI, b"g"), BAD_STREAM),
    "then an unknown frame type": (_stream_frame(0x0A, CLIENT_BIDI, b"h" * 8) + b"\x1f",
                                   BAD_ENCODING),
    "PING first": (b"\x01" + _stream_frame(0x0A, CLIENT_BIDI, b"i"), HANDLED),
    "a big frame to the end with an offset": (_stream_frame(0x0C, CLIENT_BIDI, b"j" * 3_000, 9),
                                              HANDLED),
    "a short frame, then much PADDING": (_stream_frame(0x0A, CLIENT_BIDI, b"k" * 5)
                                         + bytes(2_000), HANDLED),
    "a stream ID cut short": (b"\x0a\xc0\x00", BAD_ENCODING),
    "a length field cut short": (b"\x0a\x00\x40", BAD_ENCODING),
}


def _outcome(quic: QuicConnection, receive, payload: bytes) -> tuple:
    """What receiving ``payload`` on ``quic``'s 1-RTT space returned or raised, the events
    it made and the receive state of stream 0 and of the connection's flow control."""
    context = QuicReceiveContext(epoch=tls.Epoch.ONE_RTT, host_cid=quic.host_cid,
                                 network_path=quic._network_paths[0], quic_logger_frames=None,
                                 time=1.0, version=None)
    try:
        result: tuple = receive(context, payload)
    except QuicConnectionError as exc:
        result = (exc.error_code, exc.frame_type, exc.reason_phrase)
    events = []
    while (event := quic.next_event()) is not None:
        events.append((type(event).__name__, getattr(event, "stream_id", None),
                       getattr(event, "data", None), getattr(event, "end_stream", None)))
    streams = {sid: (s.receiver.highest_offset, s.receiver.is_finished)
               for sid, s in quic._streams.items()}
    return result, events, streams, quic._local_max_data.used


@pytest.mark.parametrize("payload, expected", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_frames_are_handled_as_aioquics_payload_loop_handles_them(tmp_path: Path, payload: bytes,
                                                                   expected) -> None:
    """The same payload on twin server connections, one through ``_frames_received``, one
    through aioquic's ``_payload_received``: same answer or error, events and stream state."""
    lean = connected_pair(tmp_path, SMALL, SMALL)[1]
    plain = connected_pair(tmp_path, SMALL, SMALL)[1]
    for quic in (lean, plain):
        while quic.next_event() is not None:
            pass
    got = _outcome(lean, lambda c, p: quic_receive._frames_received(lean, c, p), payload)
    assert got == _outcome(plain, plain._payload_received, payload)
    assert (got[0] if expected is HANDLED else got[0][0]) == expected


def test_a_frame_for_a_finished_stream_is_ignored_as_aioquic_ignores_it(tmp_path: Path) -> None:
    """Data for a stream whose receiving side is done and gone: aioquic's handler raises
    StreamFinishedError and both paths drop the frame, the packet still ACK-eliciting."""
    outcomes = []
    for receive_with_loop in (False, True):
        cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
        payload = os.urandom(2_000)
        assert _transfer(cq, sq, [payload], 1.0) == [payload]
        sq.send_stream_data(CLIENT_BIDI, b"done", end_stream=True)
        for now in (2.0, 2.1, 2.2):  # the reply, its ACK; then the server discards the stream
            for data, _ in sq.datagrams_to_send(now):
                cq.receive_datagram(bytes(data), SERVER_ADDR, now)
            for data, _ in cq.datagrams_to_send(now + 0.05):
                sq.receive_datagram(bytes(data), CLIENT_ADDR, now + 0.05)
        assert CLIENT_BIDI not in sq._streams and sq._stream_is_discarded(CLIENT_BIDI)
        late = _stream_frame(0x0E, CLIENT_BIDI, b"late", 100)
        receive = (sq._payload_received if receive_with_loop
                   else lambda c, p, sq=sq: quic_receive._frames_received(sq, c, p))
        outcomes.append(_outcome(sq, receive, late))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == (True, False) and outcomes[0][1] == []


def _stream_data_events(tmp_path: Path, payload: bytes) -> list:
    quic = connected_pair(tmp_path, SMALL, SMALL)[1]
    while quic.next_event() is not None:
        pass
    context = QuicReceiveContext(epoch=tls.Epoch.ONE_RTT, host_cid=quic.host_cid,
                                 network_path=quic._network_paths[0], quic_logger_frames=None,
                                 time=1.0, version=None)
    quic_receive._frames_received(quic, context, payload)
    return [event.data for event in iter(quic.next_event, None)
            if isinstance(event, StreamDataReceived)]


def test_a_frame_that_is_most_of_the_payload_is_a_view_of_it(tmp_path: Path) -> None:
    payload = _stream_frame(0x0A, CLIENT_BIDI, b"v" * 900)
    [data] = _stream_data_events(tmp_path, payload)
    assert isinstance(data, memoryview) and data.obj is payload and data == b"v" * 900


def test_a_small_frame_in_a_big_payload_is_copied_out(tmp_path: Path) -> None:
    """A view would keep the whole payload alive for a few bytes of data."""
    payload = _stream_frame(0x0A, CLIENT_BIDI, b"w" * 10) + bytes(2_000)
    [data] = _stream_data_events(tmp_path, payload)
    assert type(data) is bytes and data == b"w" * 10


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 3), st.one_of(st.none(), st.integers(0, 90)))
def test_the_cursor_reads_as_aioquics_buffer_reads(data: bytes, varints: int,
                                                   length: int | None) -> None:
    """What the STREAM handler does with its buffer (varints from byte 1, then the data of
    a given length or to the end, then where it stands), on the cursor and on aioquic's
    ``Buffer``: the same values, or the same error at the same step."""
    def run(buf) -> list:
        steps: list = []
        try:
            for _ in range(varints):
                steps.append(buf.pull_uint_var())
            want = buf.capacity - buf.tell() if length is None else length
            steps.append(bytes(buf.pull_bytes(want)))
        except BufferReadError:
            steps.append("BufferReadError")
        return steps + [buf.tell(), buf.eof()]
    plain = Buffer(data=data)
    plain.seek(min(1, len(data)))
    assert run(quic_receive.PayloadCursor(data, min(1, len(data)))) == run(plain)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["next", "late", "again"])),
                max_size=80))
def test_a_packet_number_joins_the_ack_ranges_as_aioquics_add_joins_it(steps) -> None:
    """Numbers in order, skipping ahead, one skipped arriving late, a duplicate:
    ``add_packet_number`` leaves the same ranges as ``RangeSet.add``."""
    lean, plain = RangeSet(), RangeSet()
    number = 0
    for gap, then in steps:
        number += 1 + gap
        arriving = [number]
        if then == "late" and gap:
            arriving.append(number - 1)  # skipped over, arrives after the next one
        elif then == "again":
            arriving.append(number)
        for packet_number in arriving:
            quic_receive.add_packet_number(lean, packet_number)
            plain.add(packet_number)
            assert list(lean) == list(plain)
