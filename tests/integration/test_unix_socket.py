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
