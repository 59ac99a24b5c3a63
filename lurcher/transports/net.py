"""Addresses and listening sockets, shared by the server's front ends and ``lurcher-mcp``.

It lives with the transports, whose helper it is (``core`` keeps to the server's own parts).

``split_address`` (``lurcher.core.wire.address``) parses ``host:port``; ``listening_socket`` binds
and listens (port 0 picks a free port) and returns a non-blocking socket for an asyncio
server or uvicorn.
"""

from __future__ import annotations

import socket

from lurcher.core.wire.address import split_address

LISTEN_BACKLOG = 1024


def listening_socket(address: str, backlog: int = LISTEN_BACKLOG) -> socket.socket:
    """A non-blocking TCP socket listening on ``address``. Raises ValueError or OSError."""
    host, port = split_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock
