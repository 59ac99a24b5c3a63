"""lurcher-mcp over HTTP stops at SIGTERM while a real MCP client session is open: the
session's event stream (the GET a client keeps open for the server's messages) is ended,
and the process exits 0 at once. The stop waited for the agent to close the stream (for
ever, for a connected agent): the event streams end on uvicorn's exit hook, which the
signal handling of lurcher-mcp never called."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

from lurcher.transports.tls import CertPaths, make_server_cert, write_pair
from tests.mcp.conftest import MCP_STOP_TIMEOUT_S, mcp_env, mcp_session
from tests.transports.conftest import CaFiles, SlowTlsClient

READ_S = 10.0


async def test_sigterm_ends_open_sessions_and_exits_0(server, http_mcp_factory) -> None:
    mcp_server = http_mcp_factory(mcp_env(server))
    code = None
    try:
        async with mcp_session("http", mcp_server.url) as mcp:
            assert (await mcp.call("ping"))["ok"]
            code = await asyncio.to_thread(mcp_server.stop)
    except Exception:
        if code is None:  # failed before the stop; after it, the session ends with the server
            raise
    assert code == 0, f"not stopped within {MCP_STOP_TIMEOUT_S} s of SIGTERM (killed)"


def _listening(host: str, port: int) -> bool:
    """Whether the listener still takes connections: refused once it is closed, reset
    while it closes with connections in its accept queue."""
    try:
        socket.create_connection((host, port), timeout=READ_S).close()
        return True
    except (ConnectionRefusedError, ConnectionResetError):
        return False


def _answer(client: SlowTlsClient) -> bytes:
    """What ``client`` is answered before the server closes its connection (bounded)."""
    received = b""
    with contextlib.suppress(OSError, ssl.SSLError):
        while data := client.sock.recv(65536):
            client.incoming.write(data)
            with contextlib.suppress(ssl.SSLWantReadError):
                received += client.tls.read(65536)
    return received


def test_tls_handshakes_done_during_the_stop_are_not_served(server, http_mcp_factory,
                                                             tmp_path) -> None:
    """A SIGTERM while TLS handshakes are in flight (over HTTPS, here while uvicorn waits
    for a request whose body never comes): those done once uvicorn had closed the
    connections it knew were handed to it anyway, served, and the stop waited for them.
    uvicorn's shutdown now aborts its handshakes in flight first: they get no answer."""
    pair = CertPaths(tmp_path / "cert.pem", tmp_path / "key.pem")
    write_pair(pair, *make_server_cert())
    mcp_server = http_mcp_factory(mcp_env(
        server, http_tls_enabled="true", http_tls_cert_file=str(pair.cert_file),
        http_tls_key_file=str(pair.key_file)))
    parts = urlsplit(mcp_server.url)
    context = ssl.create_default_context(cafile=str(pair.cert_file))
    with ExitStack() as stack:
        busy = stack.enter_context(context.wrap_socket(
            socket.create_connection((parts.hostname, parts.port), timeout=READ_S),
            server_hostname="localhost"))
        busy.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        held = [SlowTlsClient(parts.netloc, CaFiles(pair.cert_file, pair.cert_file,
                                                    pair.key_file), READ_S)
                for _ in range(5)]
        for client in held:
            stack.enter_context(client.sock)
        mcp_server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + READ_S
        while _listening(parts.hostname, parts.port):  # the shutdown has begun once not
            assert time.monotonic() < deadline
        for client in held:
            client.tls.write(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            with contextlib.suppress(OSError):
                client.sock.sendall(client.outgoing.read())
        assert [_answer(client) for client in held] == [b""] * len(held)
    assert mcp_server.stop() == 0
