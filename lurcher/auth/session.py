"""A client session: one per connection (or HTTP token), shared by every transport.

``user_id`` is None until a login succeeds. ``client_id`` (a u32 on the wire, never 0) is
unique per server run: with several shard processes, shard ``s`` of ``n`` hands out only ids
``id % n == s`` (so processes never collide), starting at a random point of its stripe on
every start and wrapping below 2**32, so a restarted shard does not hand out again the ids
of its earlier run, which clients that migrated to another shard may still hold.
``token_name`` names the personal access token the session logged in with (None after a
password login), so deleting that token can end the session; ``user_created_at`` is the
creation time of the user it logged in as, so the session never passes for a later user
given the same id (``auth.permissions.stale_login``).
"""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field
from typing import Iterator

from lurcher.core.wire.responses.clients import Transport

# The one transport enum is ``Transport`` (the wire's codes); these names are its members.
TRANSPORT_TCP = Transport.TCP
TRANSPORT_QUIC = Transport.QUIC
TRANSPORT_HTTP = Transport.HTTP
TRANSPORT_WEBSOCKET = Transport.WEBSOCKET

U32_MAX = 0xFFFF_FFFF

_client_ids: Iterator[int] = itertools.count(1)


def next_client_id() -> int:
    return next(_client_ids)


def number_clients_for_shard(shard_id: int, shards_count: int) -> None:
    """Make this process's client ids unique across shard processes (id % shards = shard)
    and across restarts of this shard (a random starting point of its stripe)."""
    global _client_ids
    if shards_count <= 1:
        _client_ids = itertools.count(1)
        return
    last_round = (U32_MAX - shard_id) // shards_count
    first_round = 1 + secrets.randbelow(last_round)
    _client_ids = _striped_ids(shard_id, shards_count, first_round, last_round)


def _striped_ids(shard_id: int, shards_count: int, first_round: int,
                 last_round: int) -> Iterator[int]:
    """``shard_id + shards_count * round`` for rounds from ``first_round`` to
    ``last_round``, then again from 1 (never 0, never above U32_MAX)."""
    while True:
        for round_ in range(first_round, last_round + 1):
            yield shard_id + shards_count * round_
        first_round = 1


@dataclass
class Session:
    address: str
    transport: int = TRANSPORT_TCP
    client_id: int = field(default_factory=next_client_id)
    user_id: int | None = None
    token_name: str | None = None
    user_created_at: int | None = None  # None: not known here (a forwarded request's session)
    login_time_us: int = 0
    last_seen_us: int = 0
    closed: bool = False
    # when this session's connection was accepted (its TLS or WebSocket handshake comes
    # after) or it last logged out: the login deadline runs from it
    logged_out_us: int = 0
    logins_in_flight: int = 0  # login requests being checked (back-off, password hash)

    @property
    def authenticated(self) -> bool:
        return self.user_id is not None

    def log_out(self, now_us: int) -> None:
        """End the login (the connection stays, and must log in again in time)."""
        self.user_id = None
        self.token_name = None
        self.user_created_at = None
        self.logged_out_us = now_us
