"""Connections that send nothing, for the connection-cap tests of the listeners: open a
number of them, and read what a server sends on one before it closes it.

Every socket has a timeout, so a server that keeps a connection it should have refused
fails the read instead of hanging the test."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def idle_connections(stack: ExitStack, host: str, port: int, count: int,
                     timeout_s: float) -> list[socket.socket]:
    """``count`` TCP connections to ``host:port`` that send nothing (closed with ``stack``)."""
    return [stack.enter_context(socket.create_connection((host, port), timeout=timeout_s))
            for _ in range(count)]


def answer_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset ends it too)."""
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    return received
