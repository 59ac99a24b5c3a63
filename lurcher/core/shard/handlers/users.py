"""User commands. Login verifies the Argon2 hash in a worker thread (it is slow on purpose)
so other connections keep being served; the connection waits, keeping its request order."""

from __future__ import annotations

import asyncio

from lurcher.core.shard.handlers.registry import handles
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.identity import IdentityInfo

USER_ACTIVE = 1


async def verify_login(shard, session, username: str, password: str) -> IdentityInfo:
    """Raises IggyError INVALID_CREDENTIALS or USER_INACTIVE."""
    state = shard.meta.state
    user_id = state.usernames.get(username)
    stored = state.users[user_id].password_hash if user_id is not None else None
    ok = await asyncio.to_thread(shard.passwords.verify, stored, password)
    user = state.users.get(user_id) if ok else None
    if user is None:
        raise IggyError(ErrorCode.INVALID_CREDENTIALS, "invalid username or password")
    if user.status != USER_ACTIVE:
        raise IggyError(ErrorCode.USER_INACTIVE, username)
    session.user_id = user.id
    session.login_time_us = shard.clock()
    return IdentityInfo(user.id)


@handles("login_user", login_required=False)
def login_user(shard, session, req):
    return verify_login(shard, session, req.username, req.password)


@handles("logout_user")
def logout_user(shard, session, req):
    session.user_id = None
    return None
