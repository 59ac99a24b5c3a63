"""Connection classes by transport name.

``CONNECTION_TYPES`` maps a transport ("tcp", "ws", "quic", "http") to a factory taking a
``ClientConfig``; the WebSocket, QUIC and HTTP classes are imported on first use (their
libraries are not loaded for TCP-only programs). ``register_transport`` adds others.
``open_connection(config)`` builds the right one (not yet connected).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection, is_connection_lost
from lurcher.sdk.connection.tcp import TcpConnection

ConnectionFactory = Callable[[ClientConfig], Connection]


def _lazy(module: str, name: str) -> ConnectionFactory:
    def build(config: ClientConfig) -> Connection:
        return getattr(importlib.import_module(module), name)(config)
    return build


CONNECTION_TYPES: dict[str, ConnectionFactory] = {
    "tcp": TcpConnection,
    "ws": _lazy("lurcher.sdk.connection.websocket", "WebSocketConnection"),
    "quic": _lazy("lurcher.sdk.connection.quic", "QuicConnection"),
    "http": _lazy("lurcher.sdk.connection.http", "HttpConnection"),
}


def register_transport(name: str, factory: ConnectionFactory) -> None:
    CONNECTION_TYPES[name] = factory


def open_connection(config: ClientConfig) -> Connection:
    """A new, unconnected connection for ``config.transport``.

    Raises IggyError FEATURE_UNAVAILABLE for a transport without a connection class.
    """
    factory = CONNECTION_TYPES.get(config.transport)
    if factory is None:
        raise IggyError(ErrorCode.FEATURE_UNAVAILABLE,
                        f"transport {config.transport!r} is not supported by this SDK yet")
    return factory(config)


__all__ = ["CONNECTION_TYPES", "Connection", "TcpConnection", "is_connection_lost",
           "open_connection", "register_transport"]
