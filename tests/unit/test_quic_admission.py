"""New QUIC connections on the server endpoint (``lurcher.transports.quic_admission``): the
connection-ID table forgets an ended connection's IDs without a scan, forged Initials beyond
``RETRY_ABOVE_HANDSHAKES`` make no connection (a stateless Retry answers them), and beyond
``MAX_HANDSHAKES`` they are dropped. The endpoint is a real ``RoutingQuicServer`` with
aioquic's connections, fed datagrams in memory."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from aioquic.quic.configuration import QuicConfiguration

from lurcher.runtime.config import load_config
from lurcher.transports.quic import RoutingQuicServer
from lurcher.transports.quic_admission import (MAX_HANDSHAKES, RETRY_ABOVE_HANDSHAKES,
                                               Admission, ConnectionIds, Refused)
from lurcher.transports.tls import ensure_certificate
from tests.support.quic_pair import forged_initial

ADDR = ("127.0.0.1", 4433)
RETRY_PACKET = 0xF0  # long header, fixed bit, type Retry (RFC 9000 §17.2.5), v1


class Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendto(self, data: bytes, addr: object = None) -> None:
        self.sent.append(bytes(data))


def test_connection_ids_keep_each_connections_own_ids() -> None:
    a, b = object(), object()
    ids = ConnectionIds()
    ids[b"1"], ids[b"2"], ids[b"3"] = a, a, b
    del ids[b"2"]
    ids[b"3"] = a  # an ID taken over by another connection moves with it
    ids[b"4"] = b
    assert ids.ids_of == {a: {b"1", b"3"}, b: {b"4"}}
    ids.forget(a)
    assert dict(ids) == {b"4": b} and ids.ids_of == {b: {b"4"}}
    ids.forget(a)  # twice: nothing left to forget
    ids.clear()
    assert not ids and not ids.ids_of


def test_admission_retries_above_the_first_mark_and_refuses_at_the_second() -> None:
    admission = Admission()
    token = admission.tokens.create_token(address=ADDR, original_destination_connection_id=b"o",
                                          retry_source_connection_id=b"r", now=1.0)
    plain = SimpleNamespace(token=b"", destination_cid=b"d")
    issued = SimpleNamespace(token=token, destination_cid=b"r")
    foreign = SimpleNamespace(token=b"a NEW_TOKEN of another server", destination_cid=b"r")
    assert admission.retry_for(plain, ADDR, 2.0) is None
    assert admission.retry_for(issued, ADDR, 2.0) is admission.tokens  # its Retry was ours
    assert admission.retry_for(foreign, ADDR, 2.0) is None  # ignored, not closed
    admission.handshaking.update(object() for _ in range(RETRY_ABOVE_HANDSHAKES))
    assert admission.retry_for(plain, ADDR, 2.0) is admission.tokens
    admission.handshaking.update(object() for _ in range(MAX_HANDSHAKES))
    with pytest.raises(Refused):
        admission.retry_for(issued, ADDR, 2.0)
    assert admission.refused == 1


async def test_forged_initials_beyond_the_mark_get_a_retry_and_make_no_connection(
        tmp_path: Path) -> None:
    configuration = QuicConfiguration(is_client=False)
    paths = ensure_certificate(load_config(environ={}).typed.quic.certificate, tmp_path)
    configuration.load_cert_chain(str(paths.cert_file), str(paths.key_file))
    server = RoutingQuicServer(configuration=configuration)
    transport = Transport()
    server.connection_made(transport)
    for _ in range(RETRY_ABOVE_HANDSHAKES + 10):
        server.datagram_received(forged_initial(), ADDR)
    made = set(server._protocols.values())
    assert len(made) == RETRY_ABOVE_HANDSHAKES == len(server.admission.handshaking)
    assert [data[0] & 0xF0 for data in transport.sent].count(RETRY_PACKET) == 10
    ended = made.pop()
    ended._connection_terminated_handler()
    assert ended not in set(server._protocols.values())
    assert ended not in server._protocols.ids_of and ended not in server.admission.handshaking
    assert len(server._protocols) == 2 * (RETRY_ABOVE_HANDSHAKES - 1)  # two IDs each

