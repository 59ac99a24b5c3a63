"""Two edges of the login deadline (``limits.login_timeout``), found by a review, on a real
server over raw TCP:

- a client that sends and never reads held the graceful close open (the server's output to
  it never drained), so it stayed connected and was logged at every check: it is dropped,
  once;
- a correct login sent in time but held by the login back-off past the deadline was cut,
  then cut again after the client reconnected: a login being checked is waited for.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from lurcher.core.wire.frames import encode_request
from lurcher.core.wire.requests.users.login_user import LoginUser

PING = encode_request(1, b"")
LOGIN_CODE = 38
NEVER_S = 20.0  # far beyond the deadlines here: reaching it means no drop came


def _tcp(server) -> tuple[str, int]:
    host, port = server.tcp_address.rsplit(":", 1)
    return host, int(port)


async def _login(reader, writer, password: str) -> int:
    writer.write(encode_request(LOGIN_CODE, LoginUser("iggy", password).encode()))
    status, length = struct.unpack("<II", await reader.readexactly(8))
    await reader.readexactly(length)
    return status


async def test_a_client_that_never_reads_is_dropped_once(server_factory) -> None:
    server = server_factory({"LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s"})
    sock = socket.create_connection(_tcp(server))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # answers back up soon
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(PING * 2_000_000)  # 16 MB of pings whose answers are never read
    await asyncio.sleep(4.0)  # the deadline and about a dozen checks after it
    try:
        await asyncio.wait_for(reader.read(), NEVER_S)  # what the server sent, then the end
    except ConnectionResetError:
        pass
    finally:
        writer.close()
    assert server.log_tail(200_000).count("did not log in within 1 s") == 1


async def test_a_login_held_by_its_back_off_is_not_cut(server_factory) -> None:
    server = server_factory({"LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s",
                             "LURCHER_AUTH_LOGIN_FREE_ATTEMPTS": "0",
                             "LURCHER_AUTH_LOGIN_BACKOFF_BASE": "1500 ms"})
    reader, writer = await asyncio.open_connection(*_tcp(server))
    assert await _login(reader, writer, "wrong-password") != 0  # the next waits 3 s
    writer.close()
    reader, writer = await asyncio.open_connection(*_tcp(server))
    try:
        assert await asyncio.wait_for(_login(reader, writer, "iggy"), NEVER_S) == 0
    finally:
        writer.close()
    assert "login back-off of 3.00 s" in server.log_tail()  # it waited past the deadline
