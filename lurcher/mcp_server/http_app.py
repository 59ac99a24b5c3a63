"""Streamable HTTP front end: the MCP endpoint at ``http.path``, ``/`` and ``/health``,
optional CORS and TLS, served by uvicorn on a socket bound before serving (so port 0 works
and the real address can be announced).

Sessions are bounded: at most ``http.max_sessions`` at once (a new one beyond is answered
503 by the MCP SDK), each ended after ``http.session_idle_timeout_s`` with no request in
flight. A request body above ``http.max_request_bytes`` is answered 413 by the MCP SDK,
with a JSON-RPC error naming the key (``TooLargeAnswer``: MCP clients show the bare 413 as
"Server returned an error response"). Connections get the server's read deadlines
(``http.header_timeout_s``, ``body_timeout_s``, ``body_min_rate``:
``transports.http.deadlines``) and a cap (``http.max_connections``, at most a quarter of
the open-files limit: ``transports.admission``): one beyond it is answered 503 and closed,
so idle connections cannot use up the process's descriptors. Over TLS uvicorn is given
plain connections: each runs its TLS handshake counted in that cap (one beyond it is closed
before it), within ``http.header_timeout_s`` (``transports.handshake``), with the server's
TLS 1.2+ context (``transports.tls.presenting``).

DNS-rebinding protection (Host and Origin checks) is on when bound to a loopback address, as
the MCP SDK recommends; origins allowed by the CORS configuration are allowed by it too
(``*`` turns the Origin check off).

Clients: with ``http.auth_token`` set, a request to the MCP endpoint without
``Authorization: Bearer <that token>`` is answered 401 before the MCP SDK sees it (CORS
preflights and ``/``, ``/health`` need none). Without it anyone who reaches the address
acts as the configured lurcher user; a listener on an address other than loopback says so
at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import logging
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from lurcher.core.wire import address as addresses
from lurcher.transports import net
from lurcher.transports.admission import listener_connections
from lurcher.transports.http.bearer import bearer_credentials
from lurcher.transports.handshake import TlsAccept, gated
from lurcher.transports.http.deadlines import ReadDeadlines, protocol_factory
from lurcher.transports.tls import CertPaths, TlsConfigError, presenting
from lurcher.mcp_server.config import ConfigError, CorsConfig, HttpConfig, resolve_token

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LISTEN_BACKLOG = 128
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal capture (which re-raises the signal after shutdown, so the
    process would die by SIGTERM instead of exiting 0); ``serve_http`` handles signals by
    calling ``handle_exit`` as uvicorn's handler would: the SSE library the MCP SDK streams
    with hooks it to end open event streams (an agent's session GET), which a stop would
    otherwise wait for until the agent went. ``on_started`` runs once serving really
    started (TLS loaded, app started, listening). Its shutdown first closes ``tls``'s
    handshakes in flight: one done after would be handed to uvicorn, and served, once it had
    closed the connections it knew, and the stop would wait for it."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None],
                 tls: TlsAccept | None = None) -> None:
        super().__init__(config)
        self.on_started = on_started
        self.tls = tls

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.on_started()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.tls is not None:
            self.tls.handshakes.close()
        await super().shutdown(sockets=sockets)


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (IPv6 hosts in brackets). Raises ConfigError."""
    try:
        return addresses.split_address(address)
    except ValueError:
        raise ConfigError(f"http.address {address!r} is not host:port") from None


def security(host: str, cors: CorsConfig) -> TransportSecuritySettings:
    if host not in LOOPBACK_HOSTS or (cors.enabled and "*" in cors.allowed_origins):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*",
               "https://127.0.0.1:*", "https://localhost:*", "https://[::1]:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=origins + (cors.allowed_origins if cors.enabled else []))


async def _index(request: Request) -> PlainTextResponse:
    return PlainTextResponse("lurcher MCP server")


async def _health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "healthy"})


class BearerAuth:
    """ASGI middleware: requests under ``path`` need ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, path: str, token: str) -> None:
        self.app, self.path = app, path.rstrip("/")
        self.expected = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self._guarded(scope["path"]) \
                and not hmac.compare_digest(bearer_credentials(scope["headers"]),
                                         self.expected):
            await JSONResponse({"error": "unauthorized: http.auth_token is set and this "
                                "request does not carry it as a Bearer token"},
                               status_code=401,
                               headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _guarded(self, path: str) -> bool:
        return path == self.path or path.startswith(self.path + "/")


class TooLargeAnswer:
    """ASGI middleware: the MCP SDK's bare 413 (a request body above ``limit`` bytes) becomes
    a JSON-RPC error naming the limit and its key, which MCP clients hand to the caller."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.answer = JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
            "code": types.INVALID_REQUEST,
            "message": f"request body above {limit} bytes (lurcher-mcp's "
                       f"http.max_request_bytes): send fewer or smaller messages per call"}},
            status_code=413)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False

        async def answering(message: Any) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                await self.answer(scope, receive, send)
            elif not replaced:
                await send(message)

        await self.app(scope, receive, answering)


def build_app(server: Server, http: HttpConfig) -> Starlette:
    """The ASGI app (its lifespan runs the MCP session manager). Raises ConfigError (an
    ``auth_token`` file that cannot be read)."""
    host, _ = split_address(http.address)
    app = server.streamable_http_app(
        streamable_http_path=http.path, host=host, transport_security=security(host, http.cors),
        custom_starlette_routes=[Route("/", _index), Route("/health", _health)],
        max_request_body_size=http.max_request_bytes, max_sessions=http.max_sessions,
        session_idle_timeout=http.session_idle_timeout_s or None)
    app.add_middleware(TooLargeAnswer, limit=http.max_request_bytes)
    token = resolve_token(http.auth_token) if http.auth_token else ""
    if token:
        app.add_middleware(BearerAuth, path=http.path, token=token)
    elif host not in LOOPBACK_HOSTS:
        log.warning("http.auth_token is not set: anyone who reaches %s acts as the "
                    "configured lurcher user", http.address)
    if http.cors.enabled:
        app.add_middleware(CORSMiddleware, **cors_options(http.cors))
    return app


def cors_options(cors: CorsConfig) -> dict[str, object]:
    options: dict[str, object] = {
        "allow_origins": cors.allowed_origins,
        "allow_methods": [m.upper() for m in cors.allowed_methods if m],
        "allow_headers": [h for h in cors.allowed_headers if h],
        "expose_headers": [h for h in cors.exposed_headers if h],
        "allow_credentials": cors.allow_credentials,
    }
    if "allow_private_network" in inspect.signature(CORSMiddleware.__init__).parameters:
        options["allow_private_network"] = cors.allow_private_network
    return options


def bind(address: str) -> socket.socket:
    """A listening socket for ``host:port`` (port 0 picks one). Raises ConfigError/OSError."""
    split_address(address)
    return net.listening_socket(address, LISTEN_BACKLOG)


def endpoint_url(sock: socket.socket, http: HttpConfig) -> str:
    host, port = sock.getsockname()[:2]
    scheme = "https" if http.tls.enabled else "http"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}{http.path}"


def https(http: HttpConfig) -> TlsAccept | None:
    """The listener's TLS (None without ``[http.tls]``): uvicorn is given plain connections,
    each runs its handshake counted in the connection cap, within ``http.header_timeout_s``
    (``transports.handshake``). Raises ConfigError (a file missing or unreadable)."""
    if not http.tls.enabled:
        return None
    try:
        context = presenting(CertPaths(Path(http.tls.cert_file), Path(http.tls.key_file)))
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None
    return TlsAccept(context, http.header_timeout_s or None)


async def serve_http(server: Server, http: HttpConfig,
                     announce: Callable[[str], None] = lambda url: None) -> None:
    """Serve until SIGINT/SIGTERM (then return normally). ``announce`` gets the endpoint URL
    once serving started (not when TLS or the app fails to start).

    Raises ConfigError or OSError when the address cannot be bound or the TLS files loaded.
    """
    app = build_app(server, http)  # before binding: a token file it cannot read stops here
    tls = https(http)  # and TLS files it cannot load
    sock = bind(http.address)
    deadlines = ReadDeadlines(http.header_timeout_s or None, http.body_timeout_s or None,
                              http.body_min_rate or None)
    cap = listener_connections("MCP over HTTP", "http.max_connections", http.max_connections,
                               http.tls.enabled)
    config = uvicorn.Config(app, log_level="warning", lifespan="on",
                            http=gated(protocol_factory(deadlines, cap), tls, cap), ws="none")
    server_ = _Uvicorn(config, lambda: announce(endpoint_url(sock, http)), tls)
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, server_.handle_exit, sig, None)
    try:
        await server_.serve(sockets=[sock])
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
