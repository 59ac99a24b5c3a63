"""The one shape of a front end, so the server starts every transport from one table.

A front end is a module with ``async def listen(shard, section, context) -> Listener``: bind
``section.address`` (``section`` is its typed ``[<name>]`` configuration, a Struct of
``runtime.settings``), serve connections of
``shard`` there and return a ``Listener``. ``FrontEnd`` is a row of the server's table: the
name (configuration section and endpoint key), the module (imported only when enabled) and
whether every shard process listens (sharing the address with SO_REUSEPORT) or shard 0 only.
Invariant: a listener's ``address`` is the bound ``host:port`` (``[host]:port`` for IPv6).
``listen`` raises OSError, ``TlsConfigError`` or ``FrontEndRefused`` for a start that cannot be.
"""

from __future__ import annotations

import importlib
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lurcher.transports.admission import ConnectionCap
from lurcher.transports.tls import server_context

if TYPE_CHECKING:
    from lurcher.runtime.settings import Tls
    from lurcher.transports.handshake import TlsAccept


class FrontEndRefused(ValueError):
    """A front end's configuration it cannot serve (the start's one-line refusal)."""


@dataclass(frozen=True)
class ListenContext:
    data_path: Path   # system.path: relative certificate paths resolve here
    reuse_port: bool  # several shard processes listen on the same address
    # the binary listeners' count and cap in this process (transports.admission); None: none
    connection_cap: ConnectionCap | None = None


class Listener(Protocol):
    address: str

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


@dataclass(frozen=True)
class FrontEnd:
    name: str
    module: str
    every_shard: bool

    async def start(self, shard: Any, section: Any, context: ListenContext) -> Listener:
        """Raises OSError (address in use, ...) or TlsConfigError."""
        return await importlib.import_module(self.module).listen(shard, section, context)


def format_address(sockname: Any) -> str:
    """``host:port`` of a bound socket name, ``[host]:port`` for IPv6."""
    host, port = sockname[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tls_context(tls: Tls, data_path: Path) -> ssl.SSLContext | None:
    """The server SSL context of a ``[<front end>.tls]`` section when enabled, else None."""
    return server_context(tls, data_path) if tls.enabled else None


class ServerListener:
    """A ``Listener`` over a server object with ``close`` (and maybe ``wait_closed``); with
    ``tls``, closing it also closes its handshakes in flight (``transports.handshake``)."""

    tls: TlsAccept | None = None  # (a subclass with its own __init__ has none)

    def __init__(self, server: Any, sockname: Any, tls: TlsAccept | None = None) -> None:
        self.server = server
        self.address = format_address(sockname)
        self.tls = tls

    def close(self) -> None:
        self.server.close()
        if self.tls is not None:
            self.tls.handshakes.close()

    async def wait_closed(self) -> None:
        wait = getattr(self.server, "wait_closed", None)
        if wait is not None:
            await wait()
