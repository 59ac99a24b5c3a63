"""Issue 14, points 1 and 2, against real ``lurcher-server`` processes.

- A request frame larger than the small-frame buffer (> 128 KiB), sent as two WebSocket
  messages with the first bytes of the next frame in the second one, is answered, and so is
  the next frame (it used to spin the event loop forever), with 1 and 2 shards.
- A shard whose event loop stops (SIGSTOP) is killed and restarted by the supervisor once
  its heartbeat is older than ``system.sharding.heartbeat_timeout``.
- An announced frame length costs memory only as its bytes arrive; before login, a frame
  above ``limits.max_unauthenticated_payload_bytes`` is refused with Unauthenticated (40)
  and the connection closed; after login SendMessages above ``max_send_payload_bytes`` gets
  InvalidCommand (3).
- A WebSocket client that floods Ping frames and never reads the Pongs is stopped (the
  server pauses reading) instead of growing the server's memory.

Memory is the resident set of the server's whole process tree (psutil).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import time
from pathlib import Path

import psutil
import pytest
from websockets.sync.client import connect as ws_connect

from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory

KIB, MIB = 1024, 1024 * 1024
UNAUTHENTICATED, INVALID_COMMAND = 40, 3
WS_ENV = {"LURCHER_WEBSOCKET_ENABLED": "true", "LURCHER_WEBSOCKET_ADDRESS": "127.0.0.1:0"}
ANSWER_WITHIN_S = 30.0  # generous: the machine is shared


def frame(code: int, payload: bytes = b"", length: int | None = None) -> bytes:
    return struct.pack("<II", len(payload) + 4 if length is None else length, code) + payload


def status_of(reply: bytes) -> tuple[int, int]:
    return struct.unpack_from("<II", reply)


def server_rss(server: LurcherServer) -> int:
    """Resident bytes of the server process and all its children (shards)."""
    root = psutil.Process(server.proc.pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


# ---------------------------------------------------------------- point 1: split frames

@pytest.mark.parametrize("shards", [1, 2])
def test_big_frame_split_across_websocket_messages_is_answered(server_factory: ServerFactory,
                                                               shards: int) -> None:
    server = server_factory({**WS_ENV, "LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
    big = frame(raw.PING, bytes(200 * KIB))
    nxt = frame(raw.PING)
    with ws_connect(f"ws://{server.endpoints['websocket']}", max_size=None,
                    open_timeout=ANSWER_WITHIN_S) as ws:
        ws.send(frame(raw.LOGIN_USER, raw.login_payload("iggy", "iggy")))
        assert status_of(ws.recv(timeout=ANSWER_WITHIN_S))[0] == 0
        ws.send(big[:1000])
        ws.send(big[1000:] + nxt[:3])
        ws.send(nxt[3:])
        assert status_of(ws.recv(timeout=ANSWER_WITHIN_S)) == (0, 0), "the 200 KiB ping"
        assert status_of(ws.recv(timeout=ANSWER_WITHIN_S)) == (0, 0), "the ping behind it"
    for _ in range(4):  # every shard still answers new clients
        with raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S) as client:
            client.login()
            client.ping()


def websocket_upgrade(address: str) -> socket.socket:
    """A raw socket past the WebSocket handshake, with a small receive buffer."""
    host, port = address.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * KIB)
    sock.settimeout(ANSWER_WITHIN_S)
    sock.connect((host, int(port)))
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 b"Sec-WebSocket-Version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4 * KIB)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def masked_ping(payload: bytes = b"p" * 125) -> bytes:
    """A client Ping frame (mask 0: the payload is sent as is)."""
    return bytes([0x89, 0x80 | len(payload)]) + bytes(4) + payload


def test_websocket_pings_never_read_do_not_grow_server_memory(
        server_factory: ServerFactory) -> None:
    """The library answers each Ping with a Pong by itself: a client that floods pings and
    never reads must be stopped (reading paused), not buffered for without bound."""
    server = server_factory(WS_ENV)
    flood, chunk = 64 * MIB, masked_ping() * 8000
    sock = websocket_upgrade(server.endpoints["websocket"])
    before = server_rss(server)
    sent = 0
    sock.settimeout(5.0)  # only ends the flood once the server stops reading
    with sock:
        with contextlib.suppress(socket.timeout):
            while sent < flood:
                sock.sendall(chunk)
                sent += len(chunk)
        grown = server_rss(server) - before
    assert grown < 24 * MIB, f"server grew {grown / MIB:.0f} MiB for {sent / MIB:.0f} MiB of pings"
    with raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S) as client:
        client.login()
        client.ping()


def shard_pid(server: LurcherServer, shard: int) -> int:
    return int((Path(server.data_dir) / "runtime" / f"shard-{shard}.pid").read_text())


def _exited(pid: int) -> bool:
    """The process has exited: reaped already, or a zombie not reaped yet (it can be reaped
    between any two looks at it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_stopped_shard_is_restarted(server_factory: ServerFactory) -> None:
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": "2",
                             "LURCHER_SYSTEM_SHARDING_HEARTBEAT_INTERVAL": "200 ms",
                             "LURCHER_SYSTEM_SHARDING_HEARTBEAT_TIMEOUT": "3 s"})
    frozen = shard_pid(server, 1)
    os.kill(frozen, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline:
            if _exited(frozen) and shard_pid(server, 1) != frozen:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the stopped shard was neither killed nor replaced within 90 s")
    finally:
        if not _exited(frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(frozen, signal.SIGCONT)
    assert psutil.Process(shard_pid(server, 1)).is_running()
    for _ in range(6):  # new connections land on both shards and are answered
        with raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S) as client:
            client.login()
            client.ping()
    assert "missed its heartbeat" in server.output_path.read_text()


# ---------------------------------------------------------------- point 2: memory per frame

def test_unauthenticated_big_frame_is_refused_before_any_allocation(server: LurcherServer) -> None:
    with socket.create_connection(_address(server), timeout=ANSWER_WITHIN_S) as sock:
        sock.sendall(frame(raw.SEND_MESSAGES, length=2**30 + 4))
        reply = _recv_exact(sock, 8)
        assert status_of(reply) == (UNAUTHENTICATED, 0)
        assert sock.recv(1) == b"", "the connection is closed after the refusal"
    with raw.RawClient(server.tcp_address) as client:
        client.login()
        client.ping()


def test_send_above_max_send_payload_is_invalid_command(server: LurcherServer) -> None:
    with raw.RawClient(server.tcp_address) as client:
        client.login()
        client.send_frame(raw.SEND_MESSAGES, length=64 * MIB + 5)
        assert client.read_response().status == INVALID_COMMAND


@pytest.mark.parametrize("over", ["tcp", "unix"])
def test_a_whole_frame_above_max_send_payload_is_answered_before_the_close(
        server_factory: ServerFactory, over: str) -> None:
    """Iggy's clients write a whole frame before they read its answer. The server refuses
    a SendMessages above the limit at its header and closes the connection: it used to
    close at once, and the reset that met the rest of the frame discarded the answer (the
    client saw "connection reset by peer", never InvalidCommand)."""
    server = server_factory({"LURCHER_UNIX_ENABLED": "true"})
    for _ in range(2):
        with _connected(server, over) as sock:
            _log_in(sock)
            sock.sendall(frame(raw.SEND_MESSAGES, length=70 * MIB + 4) + bytes(70 * MIB))
            assert status_of(_recv_exact(sock, 8)) == (INVALID_COMMAND, 0)
            assert sock.recv(1) == b"", "the connection is closed after the refusal"
    with raw.RawClient(server.tcp_address) as client:
        client.login()
        client.ping()


def test_a_lingering_connection_is_closed_though_its_client_never_closes(
        server_factory: ServerFactory) -> None:
    """After a refused frame the server reads and drops what still comes only until the
    client is quiet (0.25 s): a client that never closes its socket does not hold its
    connection (here the only one ``binary_max_connections`` allows) for ever."""
    server = server_factory({"LURCHER_LIMITS_BINARY_MAX_CONNECTIONS": "1"})
    with _connected(server, "tcp") as sock:
        _log_in(sock)  # logged in: the login timeout does not close it either
        sock.sendall(frame(raw.SEND_MESSAGES, length=70 * MIB + 4) + bytes(64 * KIB))
        assert status_of(_recv_exact(sock, 8)) == (INVALID_COMMAND, 0)
        deadline = time.monotonic() + ANSWER_WITHIN_S
        while True:  # the lingering one still counts: a new one is closed at once
            try:
                with raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S) as client:
                    client.login()
                    client.ping()
                break
            except (raw.PeerClosed, ConnectionError):
                assert time.monotonic() < deadline, "the lingering connection was kept"
                time.sleep(0.2)


def test_a_lingering_connection_ends_though_its_client_trickles_on(
        server: LurcherServer) -> None:
    """A client that keeps sending a byte every 0.1 s after a refused frame (never quiet
    long enough) is closed all the same once the lingering time (2 s) is up: its writes
    then fail."""
    with _connected(server, "tcp") as sock:
        _log_in(sock)
        sock.sendall(frame(raw.SEND_MESSAGES, length=70 * MIB + 4) + bytes(64 * KIB))
        assert status_of(_recv_exact(sock, 8)) == (INVALID_COMMAND, 0)
        deadline = time.monotonic() + ANSWER_WITHIN_S
        with pytest.raises(OSError):  # reset (or broken pipe) once the server closed
            while time.monotonic() < deadline:
                sock.sendall(b"x")
                time.sleep(0.1)


def test_a_lingering_connection_drops_a_bounded_amount(server: LurcherServer) -> None:
    """After a refused frame the server reads and drops at most ``LINGER_MAX_BYTES``
    (256 MiB): a client that keeps writing past it is cut off (its writes fail)."""
    chunk = bytes(MIB)
    with _connected(server, "tcp") as sock:
        _log_in(sock)
        sock.sendall(frame(raw.SEND_MESSAGES, length=70 * MIB + 4))
        with pytest.raises(OSError):  # reset (or broken pipe) once the server closed
            for _ in range(1024):  # 1 GiB: 4x the bound
                sock.sendall(chunk)


def _log_in(sock: socket.socket) -> None:
    sock.sendall(frame(raw.LOGIN_USER, raw.login_payload("iggy", "iggy")))
    status, length = status_of(_recv_exact(sock, 8))
    assert status == 0
    _recv_exact(sock, length)  # the user id


def _connected(server: LurcherServer, over: str) -> socket.socket:
    """A socket connected to ``server`` over TCP or its Unix socket."""
    if over == "tcp":
        sock = socket.create_connection(_address(server), timeout=ANSWER_WITHIN_S)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(ANSWER_WITHIN_S)
        sock.connect(server.endpoints["unix"])
    return sock


def test_announced_lengths_cost_memory_only_as_bytes_arrive(server: LurcherServer) -> None:
    """Eight logged-in connections each announce a 60 MiB SendMessages (under the 64 MiB
    limit) and send 64 KiB of it: the server grows by far less than 8 x 60 MiB."""
    before = server_rss(server)
    clients = []
    try:
        for _ in range(8):
            client = raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S)
            clients.append(client)
            client.login()
            client.send_bytes(frame(raw.SEND_MESSAGES, length=60 * MIB + 4) + bytes(64 * KIB))
        with raw.RawClient(server.tcp_address, timeout_s=ANSWER_WITHIN_S) as other:
            other.login()
            other.ping()  # by now the server has read what the eight sent
        grown = server_rss(server) - before
        assert grown < 64 * MIB, f"server grew by {grown / MIB:.0f} MiB"
    finally:
        for client in clients:
            client.close()


def _address(server: LurcherServer) -> tuple[str, int]:
    host, port = server.tcp_address.rsplit(":", 1)
    return host.strip("[]"), int(port)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data
