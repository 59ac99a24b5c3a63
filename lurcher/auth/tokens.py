"""Personal access tokens: generation, digests, expiry. Pure functions, no I/O, no clock.

A raw token is ``TOKEN_RANDOM_BYTES`` random bytes in standard base64 (68 characters); it
is shown to its owner once. Only its BLAKE3 hex digest is stored (the 0.8 server's choice),
and a login is matched by digest, then confirmed with ``hmac.compare_digest``.

Expiry is an absolute µs timestamp, ``NEVER`` (0) meaning no expiry. A request's expiry of 0
(server default) or u64::MAX (never) both mean no expiry; any other value is a duration
added to ``now``. A token is expired when ``expiry_at <= now``.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from typing import Any, Iterator

import blake3

from lurcher.core.wire.units import U64_MAX

TOKEN_RANDOM_BYTES = 50
NEVER = 0
NO_EXPIRY_REQUESTS = (0, U64_MAX)


def generate_token() -> str:
    """A fresh raw token (68 base64 characters)."""
    return base64.b64encode(secrets.token_bytes(TOKEN_RANDOM_BYTES)).decode("ascii")


def token_digest(token: str) -> str:
    """The stored form of ``token``: BLAKE3 of its UTF-8 bytes, lower-case hex."""
    return blake3.blake3(token.encode()).hexdigest()


def digests_equal(a: str, b: str) -> bool:
    """Constant-time comparison of two digests."""
    return hmac.compare_digest(a.encode(), b.encode())


def expiry_at(now_us: int, requested_expiry_us: int) -> int:
    """The absolute expiry for a requested duration; ``NEVER`` for 0 and u64::MAX.

    Saturates below u64::MAX so the value always fits the wire's u64.
    """
    if requested_expiry_us in NO_EXPIRY_REQUESTS:
        return NEVER
    return min(now_us + requested_expiry_us, U64_MAX - 1)


def is_expired(token_expiry_at: int, now_us: int) -> bool:
    return token_expiry_at != NEVER and token_expiry_at <= now_us


def expired_tokens(state: Any, now_us: int) -> Iterator[Any]:
    """Every stored token (``TokenMeta``) of every user that has expired at ``now_us``."""
    for user in list(state.users.values()):
        for token in list(user.tokens.values()):
            if is_expired(token.expiry_at, now_us):
                yield token
