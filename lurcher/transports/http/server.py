"""Serving the HTTP API with uvicorn inside the server's own event loop.

``start_http`` binds the socket itself (so port 0 works and the bound address is known
before serving), then runs uvicorn's startup and main loop as a task; uvicorn installs no
signal handlers this way. ``HttpServer.close()`` stops it. Connections are served by
uvicorn's h11 protocol with read deadlines (``http.deadlines``, the ``limits.http_*_timeout``
and ``limits.http_body_min_rate`` keys) and a connection cap (``transports.admission``,
``limits.http_max_connections``). With ``[http.tls]`` uvicorn is given plain connections:
each runs its TLS handshake counted in that cap, within ``limits.http_header_timeout``
(``transports.handshake``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

from lurcher.core.wire.units import U64_MAX
from lurcher.runtime.settings import seconds
from lurcher.transports.admission import http_connections
from lurcher.transports.http.app import HttpApi, build_app
from lurcher.transports.http.deadlines import ReadDeadlines, protocol_factory
from lurcher.transports.http.console import Console
from lurcher.transports.http.jwt import JwtManager
from lurcher.transports.http.metrics import Metrics, observe_commands
from lurcher.transports.net import listening_socket
from lurcher.transports.frontend import ListenContext, format_address, tls_context
from lurcher.transports.handshake import TlsAccept, gated, tls_accept

if TYPE_CHECKING:
    from lurcher.runtime.settings import Http

log = logging.getLogger(__name__)


class HttpServer:
    """A running uvicorn server on one bound socket (and the API it serves, closed with it)."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket,
                 api: HttpApi | None = None, tls: TlsAccept | None = None) -> None:
        self.server = server
        self.sock = sock
        self.api = api
        self.tls = tls
        self.task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return format_address(self.sock.getsockname())

    async def run(self) -> None:
        await self.server.startup(sockets=[self.sock])
        self.task = asyncio.ensure_future(self.server.main_loop())

    def close(self) -> None:
        self.server.should_exit = True
        if self.tls is not None:  # no handshake in flight is handed to uvicorn from now on
            self.tls.handshakes.close()

    async def wait_closed(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
        if self.server.started:
            await self.server.shutdown(sockets=[self.sock])
        if self.api is not None:
            self.api.close()


def body_rate(bytes_per_s: int) -> float | None:
    """``limits.http_body_min_rate`` as ``ReadDeadlines`` takes it: 0 or "none" is no
    minimum."""
    return float(bytes_per_s) if 0 < bytes_per_s < U64_MAX else None


async def listen(shard: Any, section: Http, context: ListenContext) -> HttpServer:
    """The front end's entry (``transports.frontend``). Raises OSError, TlsConfigError."""
    return await start_http(shard, section, context.data_path)


async def start_http(shard: Any, section: Http, data_path: Path,
                     metrics: Metrics | None = None) -> HttpServer:
    """Serve the API on ``section.address``. Raises OSError, TlsConfigError."""
    jwt = JwtManager(section.jwt, data_path / "state")
    if metrics is None:
        metrics = observe_commands(shard, section.metrics.enabled)
    api = HttpApi(shard, jwt, metrics, section.metrics.endpoint)
    console = Console() if section.web_ui else None
    app = build_app(api, section.max_request_size, section.cors, console)
    limits = shard.config.typed.limits
    deadlines = ReadDeadlines(seconds(limits.http_header_timeout) or None,
                              seconds(limits.http_body_timeout) or None,
                              body_rate(limits.http_body_min_rate))
    cap = http_connections(limits, section.tls.enabled)
    tls = tls_accept(tls_context(section.tls, data_path), limits.http_header_timeout)
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                            http=gated(protocol_factory(deadlines, cap), tls, cap), ws="none",
                            loop="none", server_header=False, proxy_headers=False)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    sock = listening_socket(section.address)
    http = HttpServer(server, sock, api, tls)
    await http.run()
    return http
