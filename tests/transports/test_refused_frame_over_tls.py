"""A refused frame over TLS (TCP with TLS), against a real server: Iggy's clients write a
whole frame before they read its answer, and they get the answer. Over plain TCP and the
Unix socket the server used to close at once, and the reset that met the rest of the frame
discarded the answer (``tests/integration/test_hardening_frames.py``); over TLS the close
(close_notify) reads on until the client answers, so this held before too: kept so every
stream transport is checked."""

from __future__ import annotations

import socket
import ssl
import struct

from tests.support import raw
from tests.support.server import LurcherServer
from tests.transports.conftest import CaFiles

MIB = 1024 * 1024
INVALID_COMMAND = 3


def _tls_socket(server: LurcherServer, ca: CaFiles) -> ssl.SSLSocket:
    host, port = server.endpoints["tcp"].rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca.ca_file))
    plain = socket.create_connection((host, int(port)), timeout=30)
    return context.wrap_socket(plain, server_hostname="localhost")


def _answer(sock: ssl.SSLSocket) -> tuple[int, bytes]:
    header = b""
    while len(header) < 8:
        chunk = sock.recv(8 - len(header))
        assert chunk, "closed before the answer"
        header += chunk
    status, length = struct.unpack("<II", header)
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return status, body


def test_a_whole_refused_frame_over_tls_gets_its_answer(tls_server, test_ca) -> None:
    with _tls_socket(tls_server, test_ca) as sock:
        sock.sendall(raw_login())
        assert _answer(sock)[0] == 0
        sock.sendall(struct.pack("<II", 70 * MIB + 4, raw.SEND_MESSAGES) + bytes(70 * MIB))
        assert _answer(sock) == (INVALID_COMMAND, b"")
        assert sock.recv(1) == b"", "closed after the refusal"


def raw_login() -> bytes:
    payload = raw.login_payload("iggy", "iggy")
    return struct.pack("<II", len(payload) + 4, raw.LOGIN_USER) + payload
