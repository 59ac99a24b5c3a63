"""A client session: one per connection (or HTTP token), shared by every transport.

``user_id`` is None until a login succeeds. ``client_id`` is unique per server run.
``token_name`` names the personal access token the session logged in with (None after a
password login), so deleting that token can end the session.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from lurcher.core.wire.responses.clients import Transport

# The one transport enum is ``Transport`` (the wire's codes); these names are its members.
TRANSPORT_TCP = Transport.TCP
TRANSPORT_QUIC = Transport.QUIC
TRANSPORT_HTTP = Transport.HTTP
TRANSPORT_WEBSOCKET = Transport.WEBSOCKET

_client_ids = itertools.count(1)


def next_client_id() -> int:
    return next(_client_ids)


def number_clients_for_shard(shard_id: int, shards_count: int) -> None:
    """Make this process's client ids unique across shard processes (id % shards = shard)."""
    global _client_ids
    _client_ids = itertools.count(shard_id + shards_count, shards_count) if shards_count > 1 \
        else itertools.count(1)


@dataclass
class Session:
    address: str
    transport: int = TRANSPORT_TCP
    client_id: int = field(default_factory=next_client_id)
    user_id: int | None = None
    token_name: str | None = None
    login_time_us: int = 0
    last_seen_us: int = 0
    closed: bool = False

    @property
    def authenticated(self) -> bool:
        return self.user_id is not None
