"""The login deadline (``limits.login_timeout``) on every binary transport (TCP, WebSocket
and QUIC, plain and over TLS), on a real server: a connection that only pings is closed
once the deadline passes, as is one that logged out and stayed so; one that logged in in
time is served long after it. The server keeps serving new connections."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from aioquic.quic.connection import QuicConnection as AioQuicConnection

from lurcher.core.quic import QuicSettings, quic_configuration
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from lurcher.sdk.connection.base import is_connection_lost
from tests.support import raw
from tests.support.server import LurcherServer
from tests.transports.conftest import (ALL_ON, CaFiles, SlowTlsClient, _serve, make_client,
                                       tls_env)

DEADLINE = {"LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s"}
# past the deadline and its check (every quarter of it), with room for a slow machine
PAST_DEADLINE_S = 3.0
BINARY = {"plain": ["tcp", "ws", "quic"], "tls": ["tcp-tls", "ws-tls", "quic-ca"]}


@pytest.fixture(scope="module", params=list(BINARY))
def deadline_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                    test_ca: CaFiles) -> Iterator[tuple[str, LurcherServer]]:
    env = {**(tls_env(test_ca) if request.param == "tls" else ALL_ON), **DEADLINE}
    for server in _serve(tmp_path_factory.mktemp(request.param), env):
        yield request.param, server


async def _closed(request) -> None:
    """``request`` fails because the server closed the connection."""
    with pytest.raises(IggyError) as raised:
        await request
    assert is_connection_lost(raised.value), raised.value


@contextlib.asynccontextmanager
async def _connected(server: LurcherServer, name: str, ca: CaFiles,
                     **fields: object) -> AsyncIterator[Client]:
    client = make_client(server, name, ca, **fields)
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


async def _pinging_only(server: LurcherServer, name: str, ca: CaFiles) -> None:
    async with _connected(server, name, ca) as client:
        await client.ping()
        await asyncio.sleep(PAST_DEADLINE_S)
        await _closed(client.ping())


async def _logged_out(server: LurcherServer, name: str, ca: CaFiles) -> None:
    async with _connected(server, name, ca) as client:
        await asyncio.sleep(PAST_DEADLINE_S)
        await _closed(client.login_user("iggy", "iggy"))  # too late
    async with _connected(server, name, ca, username="iggy", password="iggy") as client:
        await client.logout_user()
        await asyncio.sleep(PAST_DEADLINE_S)
        await _closed(client.ping())


async def _logged_in(server: LurcherServer, name: str, ca: CaFiles) -> None:
    async with _connected(server, name, ca, username="iggy", password="iggy") as client:
        await asyncio.sleep(PAST_DEADLINE_S)
        await client.ping()
        await client.get_me()  # needs the login, which is still valid


async def test_connections_must_log_in_in_time(deadline_server, test_ca: CaFiles) -> None:
    kind, server = deadline_server
    await asyncio.gather(*(check(server, name, test_ca) for name in BINARY[kind]
                           for check in (_pinging_only, _logged_out, _logged_in)))
    async with _connected(server, BINARY[kind][0], test_ca, username="iggy",
                          password="iggy") as client:
        await client.ping()
    log = server.log_tail(200_000)
    assert log.count("did not log in within 1 s: connection dropped") >= 3 * 3
    assert "Traceback" not in log


# -- the deadline runs from the accept, a slow TLS (or QUIC) handshake included ------------

SLOW_LOGIN_TIMEOUT_S = 4.0
HANDSHAKE_DONE_AFTER_S = 3.0  # within the handshake's own limit (login_timeout)
READ_S = 20.0
WEBSOCKET_UPGRADE = ("GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n").encode()


def _slow_tls_handshake_closed_in_time(server: LurcherServer, listener: str, ca: CaFiles,
                                       after_handshake: bytes) -> bool:
    client = SlowTlsClient(server.endpoints[listener], ca, READ_S)
    with client.sock:
        client.finish_after(HANDSHAKE_DONE_AFTER_S, after_handshake)
        # the old deadline ran from the handshake's end: the drop came after this, always
        return client.closed_before(time.monotonic() + SLOW_LOGIN_TIMEOUT_S)


def _slow_quic_handshake_closed_in_time(server: LurcherServer) -> bool:
    """A QUIC client that holds its handshake's last flight back the same way."""
    host, port = server.endpoints["quic"].rsplit(":", 1)
    address = (host, int(port))
    configuration = quic_configuration(QuicSettings(), is_client=True, server_name="localhost")
    configuration.verify_mode = ssl.CERT_NONE
    quic = AioQuicConnection(configuration=configuration)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(READ_S)
        quic.connect(address, now=time.monotonic())
        while not quic._handshake_complete:  # noqa: SLF001 - the client's Finished is queued
            for data, _ in quic.datagrams_to_send(now=time.monotonic()):
                sock.sendto(data, address)
            quic.receive_datagram(sock.recv(65536), address, now=time.monotonic())
        time.sleep(HANDSHAKE_DONE_AFTER_S)
        deadline = time.monotonic() + SLOW_LOGIN_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            for data, _ in quic.datagrams_to_send(now=time.monotonic()):
                sock.sendto(data, address)
            sock.settimeout(min(left, 0.5))
            try:
                quic.receive_datagram(sock.recv(65536), address, now=time.monotonic())
            except socket.timeout:
                continue
            if quic._close_event is not None:  # noqa: SLF001 - the server's close came in
                return True
    return False


def test_a_slow_handshake_does_not_extend_the_login_deadline(tmp_path, test_ca: CaFiles) -> None:
    """The login deadline ran from the session's opening, after the TLS handshake (and the
    WebSocket upgrade), itself allowed ``login_timeout``: a client could hold a connection
    for up to twice that without logging in. It runs from the accept now: a client whose
    handshake took 3 of the 4 s is dropped before 4 s more have passed (in about 1 to 2 s),
    on TLS TCP, TLS WebSocket and QUIC alike."""
    env = {**tls_env(test_ca), "LURCHER_LIMITS_LOGIN_TIMEOUT": f"{SLOW_LOGIN_TIMEOUT_S:g} s"}
    with LurcherServer() as server:
        server.start(tmp_path / "data", env)
        checks = {
            "tcp": lambda: _slow_tls_handshake_closed_in_time(
                server, "tcp", test_ca, struct.pack("<II", 4, raw.PING)),
            "websocket": lambda: _slow_tls_handshake_closed_in_time(
                server, "websocket", test_ca, WEBSOCKET_UPGRADE),
            "quic": lambda: _slow_quic_handshake_closed_in_time(server),
        }
        with ThreadPoolExecutor(len(checks)) as pool:
            closed = dict(zip(checks, pool.map(lambda check: check(), checks.values())))
        assert closed == {name: True for name in checks}
        log = server.log_tail(200_000)
        assert log.count("did not log in within 4 s: connection dropped") == 3
        assert "Traceback" not in log
