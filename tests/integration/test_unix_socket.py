"""The Unix-socket front end (``[unix]``): a new binary transport is one module plus one row
of ``server.FRONT_ENDS``. Raw frames over the socket get the same answers as over TCP."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from tests.support import raw

UNAUTHENTICATED = 40


def call(sock: socket.socket, code: int, payload: bytes = b"") -> tuple[int, bytes]:
    sock.sendall(struct.pack("<II", len(payload) + 4, code) + payload)
    header = sock.recv(8, socket.MSG_WAITALL)
    status, length = struct.unpack("<II", header)
    body = sock.recv(length, socket.MSG_WAITALL) if length else b""
    return status, body


def test_unix_socket_serves_binary_frames(server_factory, tmp_path: Path) -> None:
    server = server_factory({"LURCHER_UNIX_ENABLED": "true"})
    path = server.endpoints["unix"]
    assert Path(path).is_socket()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        status, _ = call(sock, raw.CREATE_STREAM, raw.name("s"))
        assert status == UNAUTHENTICATED
        status, _ = call(sock, raw.LOGIN_USER, raw.login_payload("iggy", "iggy"))
        assert status == 0
        assert call(sock, raw.PING) == (0, b"")
    server.close()
    assert not Path(path).exists(), "the socket file goes away with the server"


def test_unix_socket_connection_must_log_in_in_time(server_factory) -> None:
    """``limits.login_timeout`` over the Unix socket: pinging does not keep a connection
    that never logs in; the server closes it after the deadline (1 s here)."""
    server = server_factory({"LURCHER_UNIX_ENABLED": "true",
                             "LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s"})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)  # far past the deadline: reaching it means it never closed
        sock.connect(server.endpoints["unix"])
        assert call(sock, raw.PING) == (0, b"")
        assert sock.recv(1) == b"", "closed by the server once the deadline passed"
    assert "did not log in within 1 s: connection dropped" in server.log_tail()
