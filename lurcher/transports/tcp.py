"""The TCP front end: a listener whose connections are ``StreamConnection`` protocols."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from lurcher.auth.session import TRANSPORT_TCP
from lurcher.core.net import split_address
from lurcher.transports.connection import StreamConnection


def bound_address(server: asyncio.AbstractServer) -> str:
    sock = server.sockets[0]
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}"


async def start_tcp(shard: Any, address: str, ssl_context: Any = None,
                    reuse_port: bool = False) -> asyncio.AbstractServer:
    """Listen on ``address``; returns the asyncio server (its bound address via bound_address)."""
    host, port = split_address(address)
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: StreamConnection(shard, TRANSPORT_TCP), host, port,
                                    ssl=ssl_context, reuse_port=reuse_port or None, backlog=1024)
