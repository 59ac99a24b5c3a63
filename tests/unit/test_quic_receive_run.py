"""Datagrams received as a run (``lurcher.core.quic_receive_run``): the same exchange through
two connection pairs, one server receiving every datagram on its own: the data, the receive
state, the flow-control accounting and the way the connection ends are the same, with
datagrams in order, reordered, repeated, lost, damaged, on interleaved streams and over the
peer's flow-control limit; in-order data is handed up in far fewer events."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

import pytest
from aioquic.buffer import Buffer
from aioquic.quic.events import StreamDataReceived
from hypothesis import given, settings
from hypothesis import strategies as st

from lurcher.core.quic import QuicSettings
from lurcher.core.quic_receive_run import _lone_stream_frame
from tests.support.quic_pair import (CLIENT_ADDR, SERVER_ADDR, WIDE_WINDOW, connected_pair,
                                     receive_state)

SMALL = QuicSettings(initial_mtu=1200)
Mangle = Callable[[int, list[bytes]], list[bytes]]


def _as_sent(_: int, datagrams: list[bytes]) -> list[bytes]:
    return datagrams


def _mangled(round_: int, datagrams: list[bytes]) -> list[bytes]:
    """The first round's datagrams reordered, repeated, lost and damaged."""
    if round_ != 0 or len(datagrams) < 30:
        return datagrams
    out = list(datagrams)
    out[5], out[6] = out[6], out[5]
    out.insert(9, out[8])
    damaged = bytearray(out[20])
    damaged[-3] ^= 0xFF
    out[20] = bytes(damaged)
    del out[12]
    return out


def _receive(sq, datagrams: list[bytes], group: int, now: float) -> None:
    """Hand ``datagrams`` to the server ``group`` at a time (1: one by one, as aioquic
    receives them)."""
    for at in range(0, len(datagrams), group):
        if group == 1:
            sq.receive_datagram(datagrams[at], CLIENT_ADDR, now)
        else:
            sq.receive_datagrams(datagrams[at:at + group], CLIENT_ADDR, now)


def _delivered(sq) -> int:
    """The stream bytes the server's pending events deliver."""
    return sum(len(e.data) for e in iter(sq.next_event, None)
               if isinstance(e, StreamDataReceived))


def _exchange(tmp_path: Path, group: int, payloads: list[bytes], together: bool,
              mangle: Mangle = _as_sent) -> tuple:
    """``payloads`` sent client to server (one stream each, all at once when ``together``),
    the client's datagrams of each round handed to the server ``group`` at a time (1: one by
    one, as aioquic receives them); the data by stream, the data events and the server."""
    cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
    cq._loss._cc.congestion_window = WIDE_WINDOW
    got: dict[int, bytearray] = {}
    events, now = 0, 1.0
    sent: list[int] = []  # the streams sent so far
    for round_ in range(60):
        while len(sent) < len(payloads) and (together or not sent or len(
                got.get(sent[-1], b"")) == len(payloads[len(sent) - 1])):
            sent.append(cq.get_next_available_stream_id())
            cq.send_stream_data(sent[-1], payloads[len(sent) - 1], end_stream=True)
        datagrams = mangle(round_, [bytes(d) for d, _ in cq.datagrams_to_send(now)])
        _receive(sq, datagrams, group, now)
        while (event := sq.next_event()) is not None:
            if isinstance(event, StreamDataReceived):
                events += 1
                got.setdefault(event.stream_id, bytearray()).extend(event.data)
        now += 0.05
        for data, _ in sq.datagrams_to_send(now):
            cq.receive_datagram(bytes(data), SERVER_ADDR, now)
        for quic in (cq, sq):
            if quic.get_timer() is not None and quic.get_timer() <= now:
                quic.handle_timer(now)
    return {k: bytes(v) for k, v in got.items()}, events, sq


def _stream_state(sq) -> list[tuple]:
    return [(sid, s.receiver._buffer_start, s.receiver.highest_offset, s.receiver.is_finished)
            for sid, s in sorted(sq._streams.items())]


def _assert_run_is_one_by_one(tmp_path: Path, group: int, payloads: list[bytes],
                              together: bool, mangle: Mangle) -> None:
    """The exchange received in groups and one datagram at a time: every payload arrives on
    its stream, and the receive state, flow-control count and streams end up the same."""
    run_data, _, run_server = _exchange(tmp_path, group, payloads, together, mangle)
    one_data, _, one_server = _exchange(tmp_path, 1, payloads, together, mangle)
    assert run_data == one_data == dict(zip(range(0, 4 * len(payloads), 4), payloads))
    assert receive_state(run_server) == receive_state(one_server)
    assert run_server._local_max_data.used == one_server._local_max_data.used
    assert _stream_state(run_server) == _stream_state(one_server)


SCENARIOS = {
    "one after another": ([100_000, 1, 30_000], False, _as_sent),
    "interleaved streams": ([60_000, 60_000, 5_000], True, _as_sent),
    "reordered, repeated, lost, damaged": ([150_000], False, _mangled),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("group", [4, 64])
def test_a_run_leaves_what_one_datagram_at_a_time_leaves(tmp_path: Path, name: str,
                                                          group: int) -> None:
    sizes, together, mangle = SCENARIOS[name]
    payloads = [random.Random(n).randbytes(n) for n in sizes]
    _assert_run_is_one_by_one(tmp_path, group, payloads, together, mangle)


def test_in_order_data_is_handed_up_in_far_fewer_events(tmp_path: Path) -> None:
    payload = random.randbytes(200_000)  # about 170 datagrams of 1,200 bytes
    data, events, _ = _exchange(tmp_path, 64, [payload], False)
    assert data == {0: payload}
    assert events <= 12
    _, one_by_one, _ = _exchange(tmp_path, 1, [payload], False)
    assert one_by_one >= 150


def test_a_run_alone_re_arms_the_idle_timer_and_schedules_the_ack(tmp_path: Path) -> None:
    """A group of in-order STREAM packets and nothing else, a while after the last packet
    handled whole: the timer and the ACK are set as one datagram at a time sets them."""
    states = []
    for group in (1, 64):
        cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
        cq._loss._cc.congestion_window = WIDE_WINDOW
        cq.send_stream_data(0, random.Random(2).randbytes(60_000))  # no FIN
        datagrams = [bytes(d) for d, _ in cq.datagrams_to_send(1.0)]
        sq.receive_datagram(datagrams[0], CLIENT_ADDR, 1.0)
        sq.datagrams_to_send(1.0)  # the ACK it asked for leaves
        _receive(sq, datagrams[1:], group, 2.0)
        states.append((receive_state(sq), sq._local_max_data.used, _stream_state(sq)))
    assert states[0] == states[1]
    assert states[1][0][6] is not None  # the ACK is due


@pytest.mark.parametrize("limit", ["connection", "stream"])
def test_data_over_a_flow_control_limit_closes_as_aioquic_closes(tmp_path: Path,
                                                                  limit: str) -> None:
    ends = []
    for group in (1, 64):
        cq, sq, _, _ = connected_pair(tmp_path, SMALL, QuicSettings(initial_mtu=1200,
                                                                    receive_window=40_000))
        if limit == "stream":
            sq._remote_max_data = sq._local_max_data.value = 1 << 30
            sq._local_max_stream_data_bidi_remote = 30_000
        cq._loss._cc.congestion_window = WIDE_WINDOW
        cq._remote_max_data = 1 << 30  # the client ignores the server's limits
        cq.send_stream_data(0, random.Random(1).randbytes(100_000), end_stream=True)
        cq._streams[0].max_stream_data_remote = 1 << 30
        datagrams = [bytes(d) for d, _ in cq.datagrams_to_send(1.0)]
        _receive(sq, datagrams, group, 1.0)
        delivered = _delivered(sq)
        ends.append((sq._close_event.error_code, sq._close_event.reason_phrase, delivered,
                     sq._local_max_data.used))
    assert ends[0] == ends[1]
    assert ends[0][1] == f"Over {limit} data limit"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40))
def test_any_payload_is_parsed_or_refused_without_raising(payload: bytes) -> None:
    """A decrypted payload is the peer's: a truncated or odd one is left to aioquic's frame
    loop (which answers it with the right error), never an exception here."""
    frame = _lone_stream_frame(payload)
    if frame is not None:
        stream_id, offset, at, length = frame
        buf = Buffer(data=payload)
        frame_type = buf.pull_uint8()
        assert buf.pull_uint_var() == stream_id
        assert (buf.pull_uint_var() if frame_type & 4 else 0) == offset
        assert at + length == len(payload) and length > 0 and not frame_type & 1


def _mangle_by(edits: list[tuple[str, int]]) -> Mangle:
    """The first round's datagrams edited in order: swapped with the next, repeated,
    dropped or damaged, each at an index taken modulo the round's length."""
    def mangle(round_: int, datagrams: list[bytes]) -> list[bytes]:
        if round_ != 0:
            return datagrams
        out = list(datagrams)
        for edit, at in edits:
            at %= len(out) - 1
            if edit == "swap":
                out[at], out[at + 1] = out[at + 1], out[at]
            elif edit == "repeat":
                out.insert(at + 1, out[at])
            elif edit == "drop":
                del out[at]
            else:
                damaged = bytearray(out[at])
                damaged[len(damaged) // 2] ^= 0x01
                out[at] = bytes(damaged)
        return out
    return mangle


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["swap", "repeat", "drop", "damage"]),
                          st.integers(0, 200)), max_size=8),
       st.sampled_from([3, 16, 64]))
def test_any_reordering_loss_or_damage_leaves_the_same_state(tmp_path_factory, edits,
                                                             group: int) -> None:
    tmp_path = tmp_path_factory.mktemp("pair")
    payloads = [random.Random(7).randbytes(40_000), random.Random(8).randbytes(9_000)]
    _assert_run_is_one_by_one(tmp_path, group, payloads, True, _mangle_by(edits))


def test_datagrams_after_a_close_is_asked_for_are_not_recorded(tmp_path: Path) -> None:
    """Once a close is pending aioquic still delivers a packet's frames but neither records
    it nor re-arms the idle timer; a run does not open then."""
    states = []
    for group in (1, 64):
        cq, sq, _, _ = connected_pair(tmp_path, SMALL, SMALL)
        cq._loss._cc.congestion_window = WIDE_WINDOW
        cq.send_stream_data(0, random.Random(3).randbytes(20_000))
        datagrams = [bytes(d) for d, _ in cq.datagrams_to_send(1.0)]
        sq.close()
        _receive(sq, datagrams, group, 2.0)
        delivered = _delivered(sq)
        states.append((receive_state(sq), delivered))
    assert states[0] == states[1]
    assert states[0][1] == 20_000
