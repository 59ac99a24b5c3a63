"""``Client``: the async, typed Iggy/lurcher client; one method per wire command.

    async with Client.from_connection_string("iggy://iggy:iggy@127.0.0.1:8090") as client:
        await client.create_stream("orders")

Identifiers accept ``int | str`` (all-digit strings are numeric ids, as in Iggy). Results
are the wire response structs (``None`` when the server says "not found"). Every failure
is an ``IggyError`` whose ``.code`` is the Iggy ``ErrorCode`` (``InvalidArgument``, raised
before anything is sent, for a bad argument: ``sdk.arguments``). Connection life cycle
(auto-login, reconnect, heartbeat) is ``ClientSession``'s.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lurcher.sdk.api.groups import GroupsApi
from lurcher.sdk.api.messages import MessagesApi
from lurcher.sdk.api.streams import StreamsApi
from lurcher.sdk.api.system import SystemApi
from lurcher.sdk.api.users import UsersApi
from lurcher.sdk.config import DEFAULT_ADDRESS, ClientConfig
from lurcher.sdk.connstring import parse
from lurcher.sdk.session import ClientSession


class Client(ClientSession, SystemApi, UsersApi, StreamsApi, GroupsApi, MessagesApi):
    """Async client. ``Client(address, username=..., password=..., **config_fields)``."""

    def __init__(self, address: str = DEFAULT_ADDRESS, *, config: ClientConfig | None = None,
                 **fields: Any) -> None:
        """``fields`` are ``ClientConfig`` fields (``username``, ``password``, ``token``,
        ``tls``, ``heartbeat_interval_s``, ...). Raises TypeError for unknown fields."""
        if config is None:
            config = ClientConfig(address=address, **fields)
        elif fields:
            raise TypeError("give either config or keyword fields, not both")
        super().__init__(config)

    @classmethod
    def from_connection_string(cls, text: str, **overrides: Any) -> "Client":
        """A client for an ``iggy://``/``iggy+tcp://``/``lurcher://`` string (credentials in
        the string log in automatically on connect). Raises IggyError INVALID_CONNECTION_STRING."""
        config = parse(text)
        if overrides:
            config = msgspec.structs.replace(config, **overrides)
        return cls(config=config)

    async def __aenter__(self) -> "Client":
        await self.connect()
        return self
