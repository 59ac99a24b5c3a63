"""The MCP server's HTTP listener has a connection cap (``http.max_connections``, at most a
quarter of the open-files limit), as the server's listeners do: a connection beyond it is
answered 503 and closed, and once the idle ones are gone a real MCP session is served.

The listener took every connection the kernel handed it, each held until
``http.header_timeout_s``: 200 idle connections to a ``lurcher-mcp`` under a limit of 128
open files left a new MCP session hanging (its connections could not be accepted). Every
read below is bounded so a regression fails instead of hanging.
"""

from __future__ import annotations

import os
import socket
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

import httpx

from lurcher.transports.tls import CertPaths, make_server_cert, write_pair
from tests.mcp.conftest import mcp_env, mcp_session
from tests.support.idle import answer_until_closed, idle_connections

CAP = 4
READ_S = 10.0
SERVED_WITHIN_S = 10.0


def _health_once_served(url: str) -> int:
    """The status of GET /health once the listener serves again (bounded wait)."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    with httpx.Client(timeout=READ_S) as http:
        while True:
            status = http.get(url).status_code
            if status == 200 or time.monotonic() > deadline:
                return status


async def test_a_connection_beyond_the_cap_is_answered_503(server, http_mcp_factory) -> None:
    mcp_server = http_mcp_factory(mcp_env(server, http_max_connections=str(CAP),
                                          http_header_timeout_s="5"))
    parts = urlsplit(mcp_server.url)
    with ExitStack() as stack:
        idle_connections(stack, parts.hostname, parts.port, CAP, READ_S)
        beyond = idle_connections(stack, parts.hostname, parts.port, 1, READ_S)[0]
        answer = answer_until_closed(beyond)
    assert answer.startswith(b"HTTP/1.1 503 "), answer
    assert answer.endswith(b"too many connections")
    health = f"{parts.scheme}://{parts.netloc}/health"
    assert _health_once_served(health) == 200
    async with mcp_session("http", mcp_server.url) as mcp:
        assert (await mcp.call("ping"))["ok"]
    log = mcp_server.log_path.read_text()
    assert log.count(f"MCP over HTTP: {CAP} connections open (http.max_connections") == 1
    assert "Traceback" not in log


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` within ``READ_S`` without a byte (a reset too)."""
    try:
        return answer_until_closed(sock) == b""
    except socket.timeout:
        return False


async def test_over_https_connections_in_their_handshake_count_and_those_beyond_are_closed(
        server, http_mcp_factory, tmp_path) -> None:
    """uvicorn did the TLS handshake before the protocol that counts was made: connections
    that never sent their ClientHello were counted nowhere and held for the loop's 60 s
    (with 128 open files, 200 of them left a new client's handshake timing out). Now they
    count from their accept, one beyond the cap is closed at once (no 503: it would need
    the handshake), and once they are gone a real MCP session over HTTPS is served."""
    pair = CertPaths(tmp_path / "cert.pem", tmp_path / "key.pem")
    write_pair(pair, *make_server_cert())
    mcp_server = http_mcp_factory(mcp_env(
        server, http_max_connections=str(CAP), http_header_timeout_s="5",
        http_tls_enabled="true", http_tls_cert_file=str(pair.cert_file),
        http_tls_key_file=str(pair.key_file)))
    parts = urlsplit(mcp_server.url)
    with ExitStack() as stack:
        idle_connections(stack, parts.hostname, parts.port, CAP, READ_S)
        beyond = idle_connections(stack, parts.hostname, parts.port, 3 * CAP, READ_S)
        assert [_closed_by_server(sock) for sock in beyond] == [True] * len(beyond)
        assert len(os.listdir(f"/proc/{mcp_server.proc.pid}/fd")) < 2 * CAP + 16
    deadline = time.monotonic() + SERVED_WITHIN_S
    while True:  # the idle ones just closed may still count for a moment
        try:
            async with mcp_session("http", mcp_server.url, ca_file=pair.cert_file) as mcp:
                assert (await mcp.call("ping"))["ok"]
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
    log = mcp_server.log_path.read_text()
    assert log.count(f"MCP over HTTP: {CAP} connections open (http.max_connections") == 1
    assert "new ones are closed before their TLS handshake" in log
    assert "Traceback" not in log
