"""The TCP front end (TLS with ``[tcp.tls]``): a listener whose connections are
``StreamConnection`` adapters of the connection core. With TLS the listener accepts plain
connections and each runs its handshake counted in the binary cap (``transports.handshake``),
within ``limits.login_timeout``. A connection's login deadline runs from its accept (its
protocol is built then, before the handshake): one must log in within
``limits.login_timeout`` of it, however long its handshake took."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lurcher.auth.session import TRANSPORT_TCP
from lurcher.core.wire.address import split_address
from lurcher.transports.connection import StreamConnection
from lurcher.transports.frontend import ListenContext, Listener, ServerListener, tls_context
from lurcher.transports.handshake import gated, tls_accept

if TYPE_CHECKING:
    from lurcher.runtime.settings import Tcp


async def listen(shard: Any, section: Tcp, context: ListenContext) -> Listener:
    """Listen on ``section.address``. Raises OSError, TlsConfigError."""
    host, port = split_address(section.address)
    cap = context.connection_cap
    tls = tls_accept(tls_context(section.tls, context.data_path),
                     shard.config.typed.limits.login_timeout)
    server = await asyncio.get_running_loop().create_server(
        gated(lambda: StreamConnection(shard, TRANSPORT_TCP, cap=cap, accepted_us=shard.clock()),
              tls, cap), host, port,
        reuse_port=context.reuse_port or None, backlog=1024)
    return ServerListener(server, server.sockets[0].getsockname(), tls)
