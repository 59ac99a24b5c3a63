"""Command results that instruct the connection instead of answering it.

``MigrateTo(shard_id, fallback)``, returned by the router for a request that belongs to
another shard when the migration policy wants this connection there: the connection core
hands its socket to that shard together with the request and the bytes not yet handled
(at most ``MAX_CARRIED_BYTES``; ``ConnectionIO.migrate``). When it cannot (a transport that
cannot migrate, output pending, the peer refused) it answers with ``fallback()`` (the request
forwarded) instead; a request too large to carry is answered with ``fallback()`` and the
connection moves once that reply is out. Invariant: ``fallback`` is called at most once,
synchronously, while the request's payload is still valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

MAX_CARRIED_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class MigrateTo:
    shard_id: int
    fallback: Callable[[], Any]
