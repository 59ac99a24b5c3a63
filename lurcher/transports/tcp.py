"""The TCP front end (TLS with ``[tcp.tls]``): a listener whose connections are
``StreamConnection`` adapters of the connection core."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lurcher.auth.session import TRANSPORT_TCP
from lurcher.core.wire.address import split_address
from lurcher.transports.connection import StreamConnection
from lurcher.transports.frontend import ListenContext, Listener, ServerListener, tls_context

if TYPE_CHECKING:
    from lurcher.runtime.settings import Tcp


async def listen(shard: Any, section: Tcp, context: ListenContext) -> Listener:
    """Listen on ``section.address``. Raises OSError, TlsConfigError."""
    host, port = split_address(section.address)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: StreamConnection(shard, TRANSPORT_TCP, cap=context.connection_cap), host, port,
        ssl=tls_context(section.tls, context.data_path), reuse_port=context.reuse_port or None,
        backlog=1024)
    return ServerListener(server, server.sockets[0].getsockname())
