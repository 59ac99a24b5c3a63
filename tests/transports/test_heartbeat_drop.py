"""The heartbeat verifier drops a stale client that does not read, on a real server over raw
TCP, plain and TLS (found by a review): it closed the connection gracefully, which over TLS
waits for the server's output to drain (up to asyncio's 30 s TLS shutdown timeout), so a
logged-in client that sent requests, never read the answers and never pinged kept its
connection and a full output buffer. The server's side must be gone while the client still
has not read. (Plain TCP was not affected: the kernel takes the close; it is kept as the
reference.)
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time

import pytest

from lurcher.core.wire.frames import encode_request
from lurcher.core.wire.requests.system.get_me import GetMe
from tests.integration.test_login_deadline_edges import NEVER_S, _login, _tcp
from tests.transports.conftest import CaFiles

GET_ME = encode_request(GetMe.CODE, b"")
ESTABLISHED = "01"  # the state column of /proc/net/tcp


def _established(server_port: int, client_port: int) -> bool:
    """The server's end of the connection from ``client_port`` is still open."""
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            local, remote, state = line.split()[1:4]
            if (int(local.split(":")[1], 16), int(remote.split(":")[1], 16)) == (
                    server_port, client_port):
                return state == ESTABLISHED
    return False


async def _wait_dropped(server_port: int, client_port: int) -> bool:
    deadline = time.monotonic() + NEVER_S
    while _established(server_port, client_port):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


def _tls_env(ca: CaFiles) -> dict[str, str]:
    return {"LURCHER_TCP_TLS_ENABLED": "true", "LURCHER_TCP_TLS_CERT_FILE": str(ca.cert_file),
            "LURCHER_TCP_TLS_KEY_FILE": str(ca.key_file)}


def _client_tls(ca: CaFiles) -> dict[str, object]:
    return {"ssl": ssl.create_default_context(cafile=str(ca.ca_file)),
            "server_hostname": "localhost"}


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tcp-tls"])
async def test_a_stale_client_that_never_reads_is_dropped(server_factory, test_ca: CaFiles,
                                                          tls: bool) -> None:
    server = server_factory({"LURCHER_HEARTBEAT_ENABLED": "true",
                             "LURCHER_HEARTBEAT_INTERVAL": "500 ms",
                             **(_tls_env(test_ca) if tls else {})})
    host, port = _tcp(server)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # answers back up soon
    reader, writer = await asyncio.open_connection(sock=sock,
                                                   **(_client_tls(test_ca) if tls else {}))
    try:
        assert await _login(reader, writer, "iggy") == 0
        writer.write(GET_ME * 500_000)  # answers never read; no Ping, so it goes stale
        assert await _wait_dropped(port, sock.getsockname()[1])
    finally:
        writer.transport.abort()
    assert server.log_tail(200_000).count("stale client") == 1
