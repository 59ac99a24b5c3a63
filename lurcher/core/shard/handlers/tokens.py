"""Personal-access-token commands (list, create, delete, login) and the expiry cleaner.

Every command acts on the caller's own tokens only, so none needs a permission rule beyond
being logged in (login itself needs none). Only token digests are stored (``auth.tokens``);
the raw token is in the create reply and nowhere else.

Invariants: at most ``personal_access_token.max_tokens_per_user`` tokens per user; names
are unique per user; a login with an expired token is refused even before the cleaner has
removed it; deleting a token ends the sessions that logged in with it.
"""

from __future__ import annotations

import logging
from typing import Any

from lurcher.auth import tokens
from lurcher.core.meta import events as ev
from lurcher.core.shard import background
from lurcher.core.shard.handlers.registry import handles
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.units import U64_MAX
from lurcher.core.wire.requests.pat.create_personal_access_token import CreatePersonalAccessToken
from lurcher.core.wire.requests.pat.delete_personal_access_token import DeletePersonalAccessToken
from lurcher.core.wire.requests.pat.get_personal_access_tokens import GetPersonalAccessTokens
from lurcher.core.wire.requests.pat.login_with_personal_access_token import (
    LoginWithPersonalAccessToken)
from lurcher.core.shard.handlers.users import (
    USER_ACTIVE,
    end_user_sessions,
    login_failed,
    start_session,
    counts_as_login,
    wait_login_turn,
)
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.personal_access_tokens import PatInfo, RawToken

log = logging.getLogger(__name__)


def _caller(shard: ShardFace, session: Session) -> Any:
    """The logged-in user. Raises IggyError UNAUTHENTICATED if it no longer exists."""
    user = shard.meta.state.users.get(session.user_id)
    if user is None:
        raise IggyError(ErrorCode.UNAUTHENTICATED, "user no longer exists")
    return user


@handles("get_personal_access_tokens")
def get_personal_access_tokens(shard: ShardFace, session: Session,
                               req: GetPersonalAccessTokens) -> Any:
    user = _caller(shard, session)
    return [PatInfo(t.name, t.expiry_at) for _, t in sorted(user.tokens.items())]


@handles("create_personal_access_token")
def create_personal_access_token(shard: ShardFace, session: Session,
                                 req: CreatePersonalAccessToken) -> Any:
    """Raises IggyError PERSONAL_ACCESS_TOKENS_LIMIT_REACHED,
    PERSONAL_ACCESS_TOKEN_ALREADY_EXISTS."""
    user = _caller(shard, session)
    limit = shard.config.typed.personal_access_token.max_tokens_per_user
    if len(user.tokens) >= limit:
        raise IggyError(ErrorCode.PERSONAL_ACCESS_TOKENS_LIMIT_REACHED,
                        f"user {user.id} has {len(user.tokens)} of {limit} tokens")
    if req.name in user.tokens:
        raise IggyError(ErrorCode.PERSONAL_ACCESS_TOKEN_ALREADY_EXISTS, req.name)
    raw = tokens.generate_token()
    expiry_at = tokens.expiry_at(shard.clock(), req.expiry_us)
    shard.meta.record(ev.TokenCreated(user.id, req.name, tokens.token_digest(raw), expiry_at))
    return RawToken(raw)


@handles("delete_personal_access_token")
def delete_personal_access_token(shard: ShardFace, session: Session,
                                 req: DeletePersonalAccessToken) -> Any:
    """Raises IggyError RESOURCE_NOT_FOUND."""
    user = _caller(shard, session)
    if req.name not in user.tokens:
        raise IggyError(ErrorCode.RESOURCE_NOT_FOUND, f"token {req.name!r}")
    shard.meta.record(ev.TokenDeleted(user.id, req.name))
    end_user_sessions(shard, user.id, keep_client_id=session.client_id, token_name=req.name)
    return None


@handles("login_with_personal_access_token")
def login_with_personal_access_token(shard: ShardFace, session: Session,
                                     req: LoginWithPersonalAccessToken) -> Any:
    return verify_token_login(shard, session, req.token)


@counts_as_login
async def verify_token_login(shard: ShardFace, session: Session, token_text: str) -> Any:
    """Raises IggyError INVALID_PERSONAL_ACCESS_TOKEN (unknown), PERSONAL_ACCESS_TOKEN_EXPIRED,
    USER_INACTIVE. Unknown tokens slow this connection's later attempts down."""
    keys = [("connection", session.client_id)]
    await wait_login_turn(shard, keys, ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN)
    state = shard.meta.state
    digest = tokens.token_digest(token_text)
    token = state.token_hashes.get(digest)
    if token is None or not tokens.digests_equal(token.token_hash, digest):
        raise login_failed(shard, keys, ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN,
                           "unknown token")
    shard.login_throttle.succeeded(keys)
    if tokens.is_expired(token.expiry_at, shard.clock()):
        raise IggyError(ErrorCode.PERSONAL_ACCESS_TOKEN_EXPIRED, token.name)
    user = state.users[token.user_id]
    if user.status != USER_ACTIVE:
        raise IggyError(ErrorCode.USER_INACTIVE, user.username)
    return start_session(shard, session, user, token.name)


# -- expiry cleaner ----------------------------------------------------------------------
def clean_expired_tokens(shard: ShardFace, now_us: int) -> int:
    """Delete every token expired at ``now_us`` (persisted). Returns how many. Runs as the
    background job ``personal_access_token_cleaner``."""
    expired = list(tokens.expired_tokens(shard.meta.state, now_us))
    for token in expired:
        shard.meta.record(ev.TokenDeleted(token.user_id, token.name))
        log.info("removed expired personal access token %r of user %d", token.name,
                 token.user_id)
    return len(expired)


def cleaner_interval_us(shard: ShardFace) -> int | None:
    """µs between cleaner runs, or None when disabled
    (``personal_access_token.cleaner.enabled`` / ``.interval``; "none" disables it)."""
    cleaner = shard.config.typed.personal_access_token.cleaner
    if not cleaner.enabled:
        return None
    interval_us = cleaner.interval
    return None if interval_us == U64_MAX else max(interval_us, 1000)


background.register("personal_access_token_cleaner", cleaner_interval_us,
                    metadata_owner_only=True)(clean_expired_tokens)
