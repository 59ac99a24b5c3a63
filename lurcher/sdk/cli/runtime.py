"""``Run``: what a command handler gets — parsed arguments, output, the contexts store and
a lazily connected SDK ``Client``.

Handlers are ``async def handler(run: Run) -> None`` and raise CliError (or IggyError,
which ``main`` describes). The client is created on first use from the global options
(see ``options.client_config``) and closed by ``main``.
"""

from __future__ import annotations

import argparse

from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.contexts import ContextStore
from lurcher.sdk.cli.errors import describe_login
from lurcher.sdk.cli.options import client_config
from lurcher.sdk.cli.output import Output
from lurcher.sdk.client import Client
from lurcher.sdk.config import ClientConfig


class Run:
    def __init__(self, args: argparse.Namespace, out: Output,
                 store: ContextStore | None = None) -> None:
        self.args = args
        self.out = out
        self._store = store
        self._client: Client | None = None

    @property
    def store(self) -> ContextStore:
        if self._store is None:
            self._store = ContextStore()
        return self._store

    def config(self) -> ClientConfig:
        """The connection settings of this invocation. Raises CliError."""
        return client_config(self.args, self.store)

    async def client(self, config: ClientConfig | None = None) -> Client:
        """The connected (and logged-in, when credentials are known) client.

        Raises CliError describing the connection or login failure."""
        if self._client is None:
            client = Client(config=config or self.config())
            try:
                await client.connect()
            except IggyError as e:
                await client.close()
                raise describe_login(e, self.args) from None
            self._client = client
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
