"""Servers and clients for the transport suite: one plain server (TCP, WebSocket, QUIC,
HTTP) and one TLS server (TCP, WebSocket and HTTP over TLS, QUIC) using a test CA made here.

``sdk_client`` is parametrized over every transport: the same scenario runs over each, with
our SDK's ``Client`` and the transport's connection class. Servers are module-scoped.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from lurcher.sdk.client import Client
from lurcher.transports.tls import CertPaths, make_ca, make_server_cert, write_pair
from tests.support import raw
from tests.support.server import LurcherServer


ALL_ON = {
    "LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0",
    "LURCHER_QUIC_ENABLED": "true", "LURCHER_QUIC_ADDRESS": "127.0.0.1:0",
    "LURCHER_WEBSOCKET_ENABLED": "true", "LURCHER_WEBSOCKET_ADDRESS": "127.0.0.1:0",
}


@dataclass(frozen=True)
class CaFiles:
    ca_file: Path
    cert_file: Path
    key_file: Path


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> CaFiles:
    """A CA and a server certificate for localhost / 127.0.0.1 / ::1 signed by it."""
    root = tmp_path_factory.mktemp("ca")
    ca_cert, ca_key = make_ca()
    cert, key = make_server_cert(issuer=(ca_cert, ca_key))
    write_pair(CertPaths(root / "ca.pem", root / "ca_key.pem"), ca_cert, ca_key)
    write_pair(CertPaths(root / "server_cert.pem", root / "server_key.pem"), cert, key)
    return CaFiles(root / "ca.pem", root / "server_cert.pem", root / "server_key.pem")


def tls_env(ca: CaFiles) -> dict[str, str]:
    env = dict(ALL_ON)
    for section in ("TCP_TLS", "WEBSOCKET_TLS", "HTTP_TLS"):
        env[f"LURCHER_{section}_ENABLED"] = "true"
        env[f"LURCHER_{section}_CERT_FILE"] = str(ca.cert_file)
        env[f"LURCHER_{section}_KEY_FILE"] = str(ca.key_file)
    env["LURCHER_QUIC_CERTIFICATE_CERT_FILE"] = str(ca.cert_file)
    env["LURCHER_QUIC_CERTIFICATE_KEY_FILE"] = str(ca.key_file)
    return env


def all_served(connect: Callable[[], Any], count: int, within_s: float = 10.0) -> bool:
    """Whether ``count`` new clients (``connect``: a ``raw.RawClient``) all answer a Ping at
    once, within a bounded wait (connections closed just before may still count until the
    server sees them go)."""
    deadline = time.monotonic() + within_s
    while True:
        with ExitStack() as stack:
            try:
                for _ in range(count):
                    stack.enter_context(connect()).ping()
                return True
            except (OSError, raw.PeerClosed):
                if time.monotonic() > deadline:
                    return False


def handshake_but_last_flight(sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO,
                              outgoing: ssl.MemoryBIO) -> None:
    """Do ``tls``'s handshake over ``sock``, its last flight left in ``outgoing`` (not sent).
    Raises OSError (ConnectionResetError when the server closed)."""
    while True:
        try:
            tls.do_handshake()
            return
        except ssl.SSLWantReadError:
            sock.sendall(outgoing.read())
            if not (received := sock.recv(65536)):
                raise ConnectionResetError("closed in the handshake")
            incoming.write(received)


class SlowTlsClient:
    """A raw TLS client to ``address`` whose handshake waits for its last flight, for the
    tests of deadlines that a slow handshake must not extend."""

    def __init__(self, address: str, ca: CaFiles, timeout_s: float) -> None:
        host, port = address.rsplit(":", 1)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ssl.create_default_context(cafile=str(ca.ca_file)).wrap_bio(
            self.incoming, self.outgoing, server_hostname="localhost")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        handshake_but_last_flight(self.sock, self.tls, self.incoming, self.outgoing)

    def finish_after(self, seconds: float, first_bytes: bytes = b"") -> None:
        """Send the last flight ``seconds`` from now, with ``first_bytes`` after it."""
        time.sleep(seconds)
        if first_bytes:
            self.tls.write(first_bytes)
        self.sock.sendall(self.outgoing.read())

    def closed_before(self, deadline: float) -> bool:
        """Whether the server closes the connection (an end, a reset or its TLS
        close_notify) before the monotonic ``deadline``; what it sends before is dropped."""
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                if not (data := self.sock.recv(65536)):
                    return True
                self.incoming.write(data)
                while self.tls.read(65536):
                    pass
                return True  # read nothing: the close_notify
            except (ConnectionResetError, ssl.SSLZeroReturnError):
                return True
            except ssl.SSLWantReadError:
                continue
            except socket.timeout:
                return False
        return False


def _serve(tmp: Path, env: dict[str, str]) -> Iterator[LurcherServer]:
    server = LurcherServer()
    server.start(tmp, env)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    yield from _serve(tmp_path_factory.mktemp("plain"), ALL_ON)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, test_ca: CaFiles) -> Iterator[LurcherServer]:
    yield from _serve(tmp_path_factory.mktemp("tls"), tls_env(test_ca))


# name -> (server fixture, endpoint key, SDK transport, tls)
TRANSPORTS = {
    "tcp": ("plain_server", "tcp", "tcp", False),
    "tcp-tls": ("tls_server", "tcp", "tcp", True),
    "ws": ("plain_server", "websocket", "ws", False),
    "ws-tls": ("tls_server", "websocket", "ws", True),
    "quic": ("plain_server", "quic", "quic", False),
    "quic-ca": ("tls_server", "quic", "quic", True),
    "http": ("plain_server", "http", "http", False),
    "http-tls": ("tls_server", "http", "http", True),
}


def make_client(server: LurcherServer, name: str, ca: CaFiles | None = None,
                **fields: object) -> Client:
    _, endpoint, transport, tls = TRANSPORTS[name]
    options: dict[str, object] = {"transport": transport, "heartbeat_interval_s": None,
                                  "request_timeout_s": 20.0, "reconnection_enabled": False}
    if tls and ca is not None:
        options["tls_ca_file"] = str(ca.ca_file)
        options["tls"] = transport != "quic"
    options.update(fields)
    return Client(server.endpoints[endpoint], **options)


@pytest.fixture(params=list(TRANSPORTS))
def transport_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def transport_server(request: pytest.FixtureRequest, transport_name: str) -> LurcherServer:
    return request.getfixturevalue(TRANSPORTS[transport_name][0])


@pytest_asyncio.fixture
async def sdk_client(transport_server: LurcherServer, transport_name: str,
                     test_ca: CaFiles) -> AsyncIterator[Client]:
    """Our SDK's Client, logged in as iggy/iggy, over the parametrized transport."""
    client = make_client(transport_server, transport_name, test_ca,
                         username="iggy", password="iggy")
    await client.connect()
    try:
        yield client
    finally:
        await client.close()
