"""A client and a server aioquic connection joined in memory, each with its ``QuicTuning``
(the run-time tuning of ``lurcher.core.quic``), for unit tests of the QUIC tuning; and a
forged Initial packet (``forged_initial``) for the tests of a flood of them."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

from aioquic import tls
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import StreamDataReceived

from lurcher.core.quic import QuicSettings, QuicTuning, quic_configuration
from lurcher.runtime.config import load_config
from lurcher.transports.tls import ensure_certificate

CLIENT_ADDR, SERVER_ADDR = ("127.0.0.1", 1), ("127.0.0.1", 2)
WIDE_WINDOW = 4 * 1024 * 1024  # a congestion window that never holds a test's data back


class FakeLoop:
    """A clock the test moves; timers are recorded, not run."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Any) -> Any:
        self.timers.append((self.now + delay, callback))
        return self

    def cancel(self) -> None:
        """The handle's cancel."""


def connected_pair(tmp_path: Path, client: QuicSettings, server: QuicSettings,
                   cipher_suites: list | None = None
                   ) -> tuple[QuicConnection, QuicConnection, QuicTuning, QuicTuning]:
    """A client and a server aioquic connection, handshaken by passing datagrams in memory
    (``cipher_suites``: the only TLS suites the client offers)."""
    paths = ensure_certificate(load_config(environ={}).typed.quic.certificate, tmp_path)
    client_config = quic_configuration(client, is_client=True)
    client_config.verify_mode = ssl.CERT_NONE
    if cipher_suites:
        client_config.cipher_suites = cipher_suites
    server_config: QuicConfiguration = quic_configuration(server, is_client=False)
    server_config.load_cert_chain(str(paths.cert_file), str(paths.key_file))
    loop = FakeLoop()
    cq = QuicConnection(configuration=client_config)
    ct = QuicTuning(cq, client, loop, lambda: None)
    cq.connect(SERVER_ADDR, now=loop.now)
    sq = QuicConnection(configuration=server_config,
                        original_destination_connection_id=cq.original_destination_connection_id)
    st = QuicTuning(sq, server, loop, lambda: None)
    for _ in range(10):
        exchange(cq, sq, loop.now)
    assert cq._handshake_complete and sq._handshake_complete
    ct.handshake_done()
    st.handshake_done()
    return cq, sq, ct, st


def exchange(cq: QuicConnection, sq: QuicConnection, now: float) -> int:
    """One round each way; the bytes the client sent."""
    sent = 0
    for data, _ in cq.datagrams_to_send(now):
        sent += len(data)
        sq.receive_datagram(bytes(data), CLIENT_ADDR, now)  # what a socket delivers
    for data, _ in sq.datagrams_to_send(now):
        cq.receive_datagram(bytes(data), SERVER_ADDR, now)
    return sent


def deliver(sender: QuicConnection, receiver: QuicConnection, now: float, drop: set[int],
            sent: list[int]) -> None:
    """Pass ``sender``'s datagrams to ``receiver``, dropping those whose number (counted over
    the whole test in ``sent``, from 1) is in ``drop``."""
    to = SERVER_ADDR if receiver._is_client else CLIENT_ADDR
    for data, _ in sender.datagrams_to_send(now):
        sent.append(len(data))
        if len(sent) not in drop:
            receiver.receive_datagram(bytes(data), to, now)


def transfer(sender: QuicConnection, receiver: QuicConnection, drop: set[int],
             steps: int = 40) -> tuple[bytes, list[int]]:
    """Run both ends for ``steps`` steps of 50 ms (timers included), losing the sender's
    datagrams numbered in ``drop``; the stream data ``receiver`` got and the sizes of the
    datagrams ``sender`` sent."""
    received, now, sent, returned = bytearray(), 1.0, [], []
    for _ in range(steps):
        deliver(sender, receiver, now, drop, sent)
        deliver(receiver, sender, now, set(), returned)
        while (event := receiver.next_event()) is not None:
            if isinstance(event, StreamDataReceived):
                received += event.data
        now += 0.05
        for quic in (sender, receiver):
            if quic.get_timer() is not None and quic.get_timer() <= now:
                quic.handle_timer(now)
    return bytes(received), sent


def receive_state(quic: QuicConnection) -> tuple:
    """Every piece of a connection's 1-RTT receive state (numbers, ACK queue, spin bit, idle
    timer, connection ID, paths), to compare two connections that received the same."""
    space = quic._spaces[tls.Epoch.ONE_RTT]
    return (space.expected_packet_number, space.largest_received_packet,
            space.largest_received_time, list(space.ack_queue), space.received_packets._lower,
            sorted(space.received_packets._received),
            space.ack_at, quic._spin_bit, quic._spin_highest_pn, quic._close_at,
            quic._state, quic.host_cid == quic._host_cids[0].cid, len(quic._network_paths))


def forged_initial() -> bytes:
    """A well-formed QUIC v1 Initial header with random connection IDs and random bytes for
    a payload: 1,200 bytes, as a client's first datagram must be (what a flood sends)."""
    header = (bytes([0xC3]) + (1).to_bytes(4, "big") + bytes([8]) + os.urandom(8)
              + bytes([8]) + os.urandom(8) + b"\x00")
    length = 1200 - len(header) - 2
    return header + (0x4000 | length).to_bytes(2, "big") + os.urandom(length)
