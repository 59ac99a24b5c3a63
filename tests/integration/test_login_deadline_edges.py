"""Edges of the login deadline (``limits.login_timeout``), on a real server over raw TCP
(and WebSocket):

- a client that sends and never reads held the graceful close open (the server's output to
  it never drained), so it stayed connected and was logged at every check: it is dropped,
  once;
- a correct login sent in time but held by the login back-off past the deadline was cut,
  then cut again after the client reconnected: a login being checked is waited for;
- a connection whose login the server ended (its token deleted) is closed gracefully: a
  client that never reads held that close open forever, the deadline skipping connections
  already closing; it is dropped once the deadline passes.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from lurcher.core.wire.frames import encode_request
from lurcher.core.wire.requests.users.login_user import LoginUser
from tests.support import raw
from tests.support.users import DELETE_PAT, LOGIN_PAT, UserClient

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


def _client_frame(payload: bytes) -> bytes:
    """One binary WebSocket frame as a client sends it (mask 0: the payload as is)."""
    return bytes([0x82, 0x80 | 127]) + struct.pack(">Q", len(payload)) + bytes(4) + payload


def _connected(server, kind: str) -> tuple[socket.socket, callable]:
    """A socket past the WebSocket handshake (or a plain TCP one), reading little, and how
    to send a request's bytes on it."""
    address = server.endpoints["websocket"] if kind == "websocket" else server.tcp_address
    host, port = address.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # answers back up soon
    sock.settimeout(NEVER_S)
    sock.connect((host, int(port)))
    if kind == "tcp":
        return sock, sock.sendall
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 b"Sec-WebSocket-Version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)  # byte by byte: nothing after the handshake is taken here
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock, lambda data: sock.sendall(_client_frame(data))


@pytest.mark.parametrize("kind", ["tcp", "websocket"])
def test_a_login_the_server_ended_is_dropped_when_its_client_never_reads(server_factory,
                                                                         kind) -> None:
    server = server_factory({"LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s",
                             "LURCHER_WEBSOCKET_ENABLED": "true",
                             "LURCHER_WEBSOCKET_ADDRESS": "127.0.0.1:0"})
    with UserClient(server.tcp_address) as admin:
        admin.login()
        admin.create_stream("s")
        admin.create_topic("s", "t", 1)
        admin.send("s", "t", raw.partition_id(0), [raw.message(bytes(1_000_000))] * 4)
        token = admin.create_token("ended")
        sock, send = _connected(server, kind)
        poll = encode_request(raw.POLL_MESSAGES, raw.poll_payload("s", "t", 0, raw.STRATEGY_OFFSET,
                                                                 0, 10))
        with sock:
            send(encode_request(LOGIN_PAT, raw.name(token)) + poll * 8)  # 32 MB never read
            time.sleep(1.0)  # logged in, its output backed up
            admin.call(DELETE_PAT, raw.name("ended"))  # ends the login: a graceful close
            deadline = time.monotonic() + NEVER_S
            while "did not log in within 1 s" not in server.log_tail(200_000):
                assert time.monotonic() < deadline, "the connection was never dropped"
                time.sleep(0.2)
        admin.ping()
    assert server.log_tail(200_000).count("did not log in within 1 s") == 1
