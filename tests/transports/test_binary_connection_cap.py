"""The binary listeners' connection cap (``limits.binary_max_connections``, bounded by what
the open-files limit leaves the connections), on a real server.

The TCP, WebSocket and Unix-socket listeners took every connection the kernel handed them;
one that never logs in is held until ``limits.login_timeout`` (30 s), so a client opening
idle connections used up the process's descriptors: new clients were reset and a logged-in
client's CreateTopic was answered Error (1), its partition directory unreadable (EMFILE; an
adversarial probe: 450 idle TCP or WebSocket connections under a limit of 400 open files).
Now a connection beyond the cap is closed at once (WebSocket: answered 503 first), the
connections already open keep being served, and the count goes down again as connections
end, migrations to another shard included. Every read below is bounded so a regression
fails instead of hanging.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.support import raw
from tests.support.idle import answer_until_closed
from tests.support.server import LurcherServer
from tests.transports.conftest import ALL_ON, _serve, all_served

CAP = 8
READ_S = 10.0
SERVED_WITHIN_S = 10.0
UNIX_ON = {"LURCHER_UNIX_ENABLED": "true"}


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    env = {**ALL_ON, **UNIX_ON, "LURCHER_LIMITS_BINARY_MAX_CONNECTIONS": str(CAP)}
    yield from _serve(tmp_path_factory.mktemp("capped"), env)


def _connect(server: LurcherServer, listener: str) -> socket.socket:
    """A connection to ``listener`` ("tcp", "websocket" or "unix") that sends nothing."""
    if listener == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(READ_S)
        sock.connect(server.endpoints["unix"])
        return sock
    host, port = server.endpoints[listener].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=READ_S)


def _idle(stack: ExitStack, server: LurcherServer, listener: str,
          count: int) -> list[socket.socket]:
    """``count`` connections to ``listener`` that send nothing (closed with ``stack``)."""
    return [stack.enter_context(_connect(server, listener)) for _ in range(count)]


WS_UPGRADE = (b"GET / HTTP/1.1\r\nHost: lurcher\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def _held(stack: ExitStack, server: LurcherServer, listener: str, count: int) -> None:
    """``count`` connections to ``listener`` the server has taken (answered a Ping, or the
    WebSocket upgrade) and that never log in (closed with ``stack``)."""
    for sock in _idle(stack, server, listener, count):
        if listener == "websocket":
            sock.sendall(WS_UPGRADE)
            assert sock.recv(4096).startswith(b"HTTP/1.1 101 ")
        else:
            sock.sendall(struct.pack("<II", 4, raw.PING))
            assert sock.recv(8, socket.MSG_WAITALL) == struct.pack("<II", 0, 0)


def _refused(server: LurcherServer, listener: str) -> bytes:
    """What a new connection to ``listener`` gets before the server closes it (a connection
    the server keeps fails the read with a timeout)."""
    with _connect(server, listener) as sock:
        return answer_until_closed(sock)


def _all_served(server: LurcherServer, count: int) -> bool:
    """Whether ``count`` new TCP connections are all served at once (``all_served``)."""
    return all_served(lambda: raw.RawClient(server.tcp_address, timeout_s=READ_S), count,
                      SERVED_WITHIN_S)


def _topic_served(client: raw.RawClient, stream: str) -> None:
    """``client`` creates a 20-partition topic, sends to its last partition and polls."""
    client.create_stream(stream)
    client.create_topic(stream, "t", 20)
    client.send(stream, "t", raw.partition_id(19), [raw.message(b"kept")])
    assert [m.payload for m in client.poll(stream, "t", 19, count=1).messages] == [b"kept"]


def test_connections_beyond_the_cap_are_closed_on_every_binary_listener(
        capped_server: LurcherServer) -> None:
    with raw.RawClient(capped_server.tcp_address, timeout_s=READ_S) as client:
        client.login()
        with ExitStack() as stack:
            _held(stack, capped_server, "tcp", 3)
            _held(stack, capped_server, "websocket", 2)
            _held(stack, capped_server, "unix", 2)  # with the client: the cap of 8
            assert _refused(capped_server, "tcp") == b""
            assert _refused(capped_server, "unix") == b""
            answer = _refused(capped_server, "websocket")  # before its upgrade
            assert answer.startswith(b"HTTP/1.1 503 ") and answer.endswith(b"too many connections")
            _topic_served(client, "beyond")  # the connections open are still served
    log = capped_server.log_tail(10**6)  # read before the cap is tried again below
    assert log.count(f"TCP, WebSocket and Unix socket: {CAP} connections open") == 1
    # what it says of new connections is what they got (the WebSocket ones a 503)
    assert ("new ones are closed (WebSocket ones answered 503) until fewer are open"
            in log), log
    assert _all_served(capped_server, CAP)  # every one closed: the count is back to zero
    assert "Traceback" not in capped_server.log_tail(10**6)


@pytest.mark.parametrize("listener", ["tcp", "websocket"])
def test_idle_connections_leave_descriptors_for_logged_in_clients_and_storage(
        tmp_path, listener: str) -> None:
    """Under a limit of 256 open files (no key set) the cap is a quarter, 64: 300 idle
    connections no longer leave a logged-in client's new topic without its partition
    files; once they closed, 64 new connections are served again."""
    server = LurcherServer()
    server.open_files_limit = (256, 256)
    with server, ExitStack() as stack:
        server.start(tmp_path / "data", ALL_ON)
        with raw.RawClient(server.tcp_address, timeout_s=READ_S) as client:
            client.login()
            _idle(stack, server, listener, 300)
            _topic_served(client, "s")
            stack.close()
        assert _all_served(server, 64)
        log = server.log_tail(10**6)
        assert log.count("TCP, WebSocket and Unix socket: 64 connections open") == 1
        assert "Traceback" not in log


def test_connections_migrated_to_another_shard_leave_the_count(tmp_path) -> None:
    """With two shards, clients whose sends move them to the other shard's process (socket
    migration) are counted there and no longer where they came from: after twenty of them,
    both processes have room for the cap again."""
    server = LurcherServer()
    with server:
        server.start(tmp_path / "data", {"LURCHER_SYSTEM_SHARDING_SHARDS": "2",
                                         "LURCHER_LIMITS_BINARY_MAX_CONNECTIONS": "4"})
        with raw.RawClient(server.tcp_address, timeout_s=READ_S) as client:
            client.login()
            client.create_stream("s")
            client.create_topic("s", "t", 4)
        for _ in range(20):
            with raw.RawClient(server.tcp_address, timeout_s=READ_S) as client:
                client.login()
                for partition in range(4):
                    for _ in range(3):
                        client.send("s", "t", raw.partition_id(partition), [raw.message(b"m")])
        log = server.log_tail(10**6)
        assert "migrated to shard" in log
        assert "connections open" not in log  # read before the cap is tried again below
        assert _all_served(server, 4)
