"""Datagrams leave while the rest of a transmit is built (issue 18): a steady connection's
packet builder hands finished datagrams to the connection's ``early_send`` every
``early_bytes`` (``lurcher.core.quic_builder``), and ``TunedQuicProtocol.send_datagrams``
sends what the build returns after them, so every datagram leaves exactly once, in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aioquic import tls
from aioquic.quic.events import StreamDataReceived
from aioquic.quic.packet import QuicFrameType, QuicPacketType
from aioquic.quic.packet_builder import QuicPacketBuilder

from lurcher.core.quic import QuicSettings, TunedQuicProtocol, chunk_bytes
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair, exchange

BIG = QuicSettings(initial_mtu=64_000)
PAYLOAD = bytes(range(256)) * 4096  # 1 MiB
NEW_ADDR = ("127.0.0.1", 7777)


def _received(server: Any) -> bytes:
    got = bytearray()
    event = server.next_event()
    while event is not None:
        if isinstance(event, StreamDataReceived):
            got += event.data
        event = server.next_event()
    return bytes(got)


def test_a_steady_build_hands_its_datagrams_out_as_it_goes(tmp_path: Path) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, BIG, BIG)
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    sent_packets = cq._spaces[tls.Epoch.ONE_RTT].sent_packets
    handed: list[list] = []
    registered_then: list[int] = []

    def early(datagrams: list) -> None:
        handed.append(list(datagrams))
        registered_then.append(len(sent_packets))

    registered_before = len(sent_packets)
    cq.early_send, cq.early_bytes = early, chunk_bytes(64_000)
    cq.send_stream_data(cq.get_next_available_stream_id(), PAYLOAD, end_stream=True)
    returned = [data for data, addr in cq.datagrams_to_send(1.0)]

    # one datagram per hand-out: two 64,000-byte datagrams never go in one offloaded send
    assert len(handed) == len(PAYLOAD) // 64_000 and all(len(g) == 1 for g in handed)
    assert registered_then == [registered_before] * len(handed)  # before the build ended
    flat = [d for group in handed for d in group]
    assert all(a is b for a, b in zip(flat, returned))  # the first ones returned, in order
    assert len(sent_packets) == registered_before + len(returned)  # every packet registered
    for data in returned:
        sq.receive_datagram(bytes(data), CLIENT_ADDR, 1.0)
    assert _received(sq) == PAYLOAD


def test_a_build_during_the_handshake_hands_nothing_out(tmp_path: Path) -> None:
    cq, _, _, _ = connected_pair(tmp_path, BIG, BIG)
    cq._handshake_done_pending = True  # not steady: aioquic's own loop builds
    handed: list = []
    cq.early_send, cq.early_bytes = handed.append, 1
    cq.send_stream_data(cq.get_next_available_stream_id(), PAYLOAD[:300_000], end_stream=True)
    assert len(cq.datagrams_to_send(1.0)) > 1 and handed == []


class RecordingTransport:
    """What the protocol hands to its UDP transport, datagram by datagram."""

    def __init__(self) -> None:
        self.calls: list[list] = []

    def send_datagrams(self, datagrams: list, addr: Any) -> None:
        assert addr == SERVER_ADDR
        self.calls.append(list(datagrams))

    def sendto(self, data: Any, addr: Any) -> None:
        self.send_datagrams([data], addr)


async def test_the_protocol_sends_every_datagram_once_in_order(tmp_path: Path) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, BIG, BIG)
    protocol = TunedQuicProtocol(cq, settings=BIG)
    transport = RecordingTransport()
    protocol.connection_made(transport)
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    registered_before = len(cq._spaces[tls.Epoch.ONE_RTT].sent_packets)
    cq.send_stream_data(cq.get_next_available_stream_id(), PAYLOAD, end_stream=True)
    protocol.send_datagrams()

    sent = [d for call in transport.calls for d in call]
    assert len(transport.calls) >= len(PAYLOAD) // 64_000  # as built, not all at the end
    assert len({id(d) for d in sent}) == len(sent)  # none twice
    assert len(sent) == len(cq._spaces[tls.Epoch.ONE_RTT].sent_packets) - registered_before
    for data in sent:
        sq.receive_datagram(bytes(data), CLIENT_ADDR, 1.0)
    assert _received(sq) == PAYLOAD


def test_a_build_failing_after_a_hand_out_closes_without_reusing_packet_numbers(
        tmp_path: Path) -> None:
    cq, _, _, _ = connected_pair(tmp_path, BIG, BIG)
    cq._loss._cc.congestion_window = 4 * 1024 * 1024
    handed: list[int] = []

    def early(datagrams: list) -> None:
        handed.append(len(datagrams))
        if len(handed) == 2:
            raise OSError("the socket went away")

    cq.early_send, cq.early_bytes = early, chunk_bytes(64_000)
    first = cq._packet_number
    cq.send_stream_data(cq.get_next_available_stream_id(), PAYLOAD, end_stream=True)
    with pytest.raises(OSError):
        cq.datagrams_to_send(1.0)
    assert cq._packet_number >= first + sum(handed)  # what left keeps its numbers
    assert cq._close_pending  # a CONNECTION_CLOSE goes next


def test_a_build_stopped_by_the_amplification_limit_after_a_hand_out_keeps_the_connection(
        tmp_path: Path) -> None:
    """aioquic ends a build with QuicPacketBuilderStop when a path not yet validated has
    used its anti-amplification budget (after a NAT rebinding, say): every packet built is
    registered, so that is no failure and the connection stays."""
    cq, sq, _, _ = connected_pair(tmp_path, BIG, BIG)
    cq.send_stream_data(0, b"request", end_stream=True)
    exchange(cq, sq, 1.0)
    cq.send_stream_data(4, b"x" * 200_000, end_stream=True)
    for data, _ in cq.datagrams_to_send(1.0):  # the client's address changed
        sq.receive_datagram(bytes(data), NEW_ADDR, 1.0)
    sq.datagrams_to_send(1.0)  # the PATH_CHALLENGE for the new path
    path = sq._network_paths[0]
    assert path.addr == NEW_ADDR and not path.is_validated and path.local_challenge_sent
    handed: list = []
    sq.early_send, sq.early_bytes = handed.extend, chunk_bytes(sq._max_datagram_size)
    sent_packets = sq._spaces[tls.Epoch.ONE_RTT].sent_packets
    registered_before = len(sent_packets)
    sq.send_stream_data(0, PAYLOAD, end_stream=True)
    returned = sq.datagrams_to_send(1.0)
    assert handed and len(returned) > len(handed)  # stopped after a hand-out
    assert path.bytes_sent <= 3 * path.bytes_received
    assert not sq._close_pending and sq._close_event is None
    assert len(sent_packets) == registered_before + len(returned)


async def test_datagrams_probing_another_path_go_to_its_address(tmp_path: Path) -> None:
    cq, sq, _, _ = connected_pair(tmp_path, BIG, BIG)
    cq.send_stream_data(0, b"request", end_stream=False)
    exchange(cq, sq, 1.0)
    protocol = TunedQuicProtocol(sq, settings=BIG)
    transport = AddressedTransport()
    protocol.connection_made(transport)
    # the client probes from a new address: a packet holding a PATH_CHALLENGE only
    builder = QuicPacketBuilder(host_cid=cq.host_cid, peer_cid=cq._peer_cid.cid,
                                version=cq._version, is_client=True, max_datagram_size=1200,
                                packet_number=cq._packet_number)
    builder.start_packet(QuicPacketType.ONE_RTT, cq._cryptos[tls.Epoch.ONE_RTT])
    builder.start_frame(QuicFrameType.PATH_CHALLENGE, capacity=9).push_bytes(b"probe123")
    probe, _ = builder.flush()
    cq._packet_number = builder.packet_number
    sq.receive_datagram(bytes(probe[0]) + bytes(1200 - len(probe[0])), NEW_ADDR, 1.0)
    sq.send_stream_data(0, b"reply", end_stream=True)  # something for the active path too
    intended: list = []
    build = sq.datagrams_to_send

    def recorded(now: float) -> list:
        datagrams = build(now)
        intended.extend((addr, bytes(data)) for data, addr in datagrams)
        return datagrams

    sq.datagrams_to_send = recorded
    protocol.send_datagrams()

    assert {addr for addr, _ in intended} == {CLIENT_ADDR, NEW_ADDR}
    assert transport.sent == intended


class AddressedTransport:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, bytes]] = []

    def send_datagrams(self, datagrams: list, addr: Any) -> None:
        self.sent += [(addr, bytes(d)) for d in datagrams]
