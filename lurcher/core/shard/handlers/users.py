"""User commands: login/logout, get, list, create, update, permissions, password, delete.

Argon2 work (verify on login and password change, hash on create and change) runs in a
worker thread so other connections keep being served; the connection waits, keeping its
request order. State is re-checked after every await (another connection may have changed
it meanwhile) before an event is recorded, and so are the caller's login and permission
(``recheck``): a change runs only if its caller may still make it when it is recorded.

Invariants: the root user (id ``ROOT_USER_ID``) cannot be deleted, deactivated or have its
permissions changed; deleting or deactivating a user ends every session logged in as it
(``end_user_sessions``), so a stale session never acts as a user that was removed or as a
later user that reuses its id, and takes it out of its consumer groups at once, connected or
not (the caller of the change stays connected); the other shards end theirs as they apply the change
(``end_stale_sessions``, from ``lifecycle``). Permission rules (``auth.permissions``): reads need
``read_users`` (a user may always read itself), changes need ``manage_users`` (a user may
always change its own password, proving the current one, as everyone must).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lurcher.auth.permissions import recheck, stale_login
from lurcher.auth.root import ROOT_USER_ID
from lurcher.core.meta import events as ev
from lurcher.core.shard.handlers.registry import handles
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.address import peer_host
from lurcher.core.wire.requests.users.change_password import ChangePassword
from lurcher.core.wire.requests.users.create_user import CreateUser
from lurcher.core.wire.requests.users.delete_user import DeleteUser
from lurcher.core.wire.requests.users.get_user import GetUser
from lurcher.core.wire.requests.users.get_users import GetUsers
from lurcher.core.wire.requests.users.login_user import LoginUser
from lurcher.core.wire.requests.users.logout_user import LogoutUser
from lurcher.core.wire.requests.users.update_permissions import UpdatePermissions
from lurcher.core.wire.requests.users.update_user import UpdateUser
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.responses.users import UserDetails, UserHeader
from lurcher.core.wire.values.permissions import Permissions

log = logging.getLogger(__name__)

USER_ACTIVE = 1
USER_INACTIVE = 2


# -- helpers -----------------------------------------------------------------------------
def user_header(user: Any) -> UserHeader:
    return UserHeader(user.id, user.created_at, user.status, user.username)


def user_details(user: Any) -> UserDetails:
    perms = Permissions.decode(user.permissions)[0] if user.permissions else None
    return UserDetails(user_header(user), perms)


def permissions_blob(permissions: Permissions | None) -> bytes | None:
    return None if permissions is None else permissions.encode()


def end_user_sessions(shard: ShardFace, user_id: int, keep_client_id: int | None = None,
                      token_name: str | None = None) -> int:
    """Log out every session of ``user_id`` (only those that logged in with ``token_name``
    when given); disconnect all but ``keep_client_id`` (the caller, which still gets its
    reply). Returns how many sessions were ended."""
    ended = 0
    for client_id, session in list(shard.sessions.items()):
        if session.user_id != user_id:
            continue
        if token_name is not None and session.token_name != token_name:
            continue
        _end_session(shard, client_id, session, disconnect=client_id != keep_client_id)
        ended += 1
    return ended


def end_stale_sessions(shard: ShardFace, user_id: int | None = None) -> int:
    """On a shard that did not run the change (the metadata owner's handler ends its own
    sessions): log out every session (of ``user_id``, when given) whose login no longer
    holds (``stale_login``: its user deleted, deactivated or replaced, its token deleted)
    and disconnect it, unless it awaits a reply (the caller of the change, forwarded to
    the owner: it gets its answer, and the dispatcher refuses its next command). Returns
    how many sessions were ended."""
    ended = 0
    for client_id, session in list(shard.sessions.items()):
        if not session.authenticated or (user_id is not None and session.user_id != user_id):
            continue
        if stale_login(shard.meta.state, session) is None:
            continue
        connection = shard.connections.get(client_id)
        _end_session(shard, client_id, session,
                     disconnect=connection is not None and not connection.busy)
        ended += 1
    return ended


def _end_session(shard: ShardFace, client_id: int, session: Session, disconnect: bool) -> None:
    """Log the session out and take it out of its consumer groups now, also when its
    connection stays (the caller, or one awaiting a reply): its partitions go to members
    that can still poll them."""
    session.log_out(shard.clock())
    shard.leave_groups(client_id)
    connection = shard.connections.get(client_id)
    if disconnect and connection is not None:
        connection.disconnect()


def require_unused_username(state: Any, username: str, user_id: int | None = None) -> None:
    """Raises IggyError USER_ALREADY_EXISTS if another user has ``username``."""
    owner = state.usernames.get(username)
    if owner is not None and owner != user_id:
        raise IggyError(ErrorCode.USER_ALREADY_EXISTS, username)


# -- login / logout ----------------------------------------------------------------------
def start_session(shard: ShardFace, session: Session, user: Any,
                  token_name: str | None = None) -> IdentityInfo:
    """Bind ``session`` to ``user`` (replacing any earlier login on it)."""
    session.user_id = user.id
    session.token_name = token_name
    session.user_created_at = user.created_at
    session.login_time_us = shard.clock()
    return IdentityInfo(user.id)


async def wait_login_turn(shard: ShardFace, keys: list[Any], code: ErrorCode) -> None:
    """Sleep (this connection only) while earlier failures of ``keys`` ask for back-off.
    Raises IggyError(code) at once, without checking anything, when the wait would exceed
    ``auth.login_backoff_max`` (parallel guesses already fill the slots)."""
    delay = shard.login_throttle.reserve(keys, time.monotonic())
    if delay is None:
        log.warning("login refused unchecked: too many failed attempts for %s", keys)
        raise IggyError(code, "too many failed logins, retry later")
    if delay > 0:
        log.info("login back-off of %.2f s for %s", delay, keys)
        await asyncio.sleep(delay)


def login_failed(shard: ShardFace, keys: list[Any], code: ErrorCode, detail: str) -> IggyError:
    shard.login_throttle.failed(keys, time.monotonic())
    return IggyError(code, detail)


def counts_as_login(check: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``check(shard, session, ...)`` is a login being checked while it runs
    (``Session.logins_in_flight``: the login deadline waits for it)."""
    @functools.wraps(check)
    async def counted(shard: ShardFace, session: Session, *args: Any) -> Any:
        session.logins_in_flight += 1
        try:
            return await check(shard, session, *args)
        finally:
            session.logins_in_flight -= 1
    return counted


@counts_as_login
async def verify_login(shard: ShardFace, session: Session, username: str,
                       password: str) -> IdentityInfo:
    """Raises IggyError INVALID_CREDENTIALS or USER_INACTIVE (the latter only after the
    password matched, so an inactive account is not revealed to a guesser). Failures slow
    later attempts of this connection, and of this username from the same host, down
    (``auth.throttle``): guesses from one host cannot lock a user out of every other host."""
    keys = [("connection", session.client_id), ("user", username, peer_host(session.address))]
    await wait_login_turn(shard, keys, ErrorCode.INVALID_CREDENTIALS)
    state = shard.meta.state
    user_id = state.usernames.get(username)
    stored = state.users[user_id].password_hash if user_id is not None else None
    ok = await shard.passwords.off_loop(shard.passwords.verify, stored, password)
    user = state.users.get(user_id) if ok else None
    if user is None or user.password_hash != stored:
        raise login_failed(shard, keys, ErrorCode.INVALID_CREDENTIALS,
                           "invalid username or password")
    shard.login_throttle.succeeded(keys)
    if user.status != USER_ACTIVE:
        raise IggyError(ErrorCode.USER_INACTIVE, username)
    return start_session(shard, session, user)


@handles("login_user")
def login_user(shard: ShardFace, session: Session, req: LoginUser) -> Any:
    return verify_login(shard, session, req.username, req.password)


@handles("logout_user")
def logout_user(shard: ShardFace, session: Session, req: LogoutUser) -> Any:
    session.log_out(shard.clock())
    return None


# -- reads -------------------------------------------------------------------------------
@handles("get_user")
def get_user(shard: ShardFace, session: Session, req: GetUser) -> Any:
    try:
        user = shard.meta.state.user(req.user_id)
    except IggyError:
        return None
    return user_details(user)


@handles("get_users")
def get_users(shard: ShardFace, session: Session, req: GetUsers) -> Any:
    users = shard.meta.state.users
    return [user_header(users[uid]) for uid in sorted(users)]


# -- changes -----------------------------------------------------------------------------
async def _create_user(shard: ShardFace, session: Session, req: CreateUser) -> UserDetails:
    state = shard.meta.state
    require_unused_username(state, req.username)
    password_hash = await shard.passwords.off_loop(shard.passwords.hash, req.password)
    recheck(shard.meta.state, session, "manage_users", req)
    require_unused_username(state, req.username)
    user_id = state.user_ids.peek()
    shard.meta.record(ev.UserCreated(user_id, req.username, password_hash, req.status,
                                     permissions_blob(req.permissions), shard.clock()))
    return user_details(state.users[user_id])


@handles("create_user")
def create_user(shard: ShardFace, session: Session, req: CreateUser) -> Any:
    """Raises IggyError USER_ALREADY_EXISTS."""
    return _create_user(shard, session, req)


@handles("update_user")
def update_user(shard: ShardFace, session: Session, req: UpdateUser) -> Any:
    """Raises IggyError RESOURCE_NOT_FOUND, USER_ALREADY_EXISTS, CANNOT_DELETE_USER (root
    deactivation)."""
    state = shard.meta.state
    user = state.user(req.user_id)
    username = user.username if req.username is None else req.username
    status = user.status if req.status is None else req.status
    if user.id == ROOT_USER_ID and status != USER_ACTIVE:
        raise IggyError(ErrorCode.CANNOT_DELETE_USER, "the root user cannot be deactivated")
    require_unused_username(state, username, user.id)
    if (username, status) != (user.username, user.status):
        shard.meta.record(ev.UserUpdated(user.id, username, status))
    if status != USER_ACTIVE:
        end_user_sessions(shard, user.id, keep_client_id=session.client_id)
    return None


@handles("update_permissions")
def update_permissions(shard: ShardFace, session: Session, req: UpdatePermissions) -> Any:
    """Raises IggyError RESOURCE_NOT_FOUND, CANNOT_CHANGE_PERMISSIONS (root)."""
    user = shard.meta.state.user(req.user_id)
    if user.id == ROOT_USER_ID:
        raise IggyError(ErrorCode.CANNOT_CHANGE_PERMISSIONS, "root permissions are fixed")
    shard.meta.record(ev.UserPermissionsUpdated(user.id, permissions_blob(req.permissions)))
    return None


def _rehash(passwords: Any, stored: str, current: str, new: str) -> str | None:
    """The new password's hash, or None when ``current`` does not match ``stored``."""
    return passwords.hash(new) if passwords.verify(stored, current) else None


async def _change_password(shard: ShardFace, session: Session, req: ChangePassword) -> None:
    state = shard.meta.state
    user = state.user(req.user_id)
    stored = user.password_hash
    new_hash = await shard.passwords.off_loop(_rehash, shard.passwords, stored,
                                              req.current_password, req.new_password)
    if new_hash is None:
        raise IggyError(ErrorCode.INVALID_CREDENTIALS, "current password does not match")
    recheck(shard.meta.state, session, "change_password", req)
    if state.users.get(user.id) is not user or user.password_hash != stored:
        raise IggyError(ErrorCode.INVALID_CREDENTIALS, "user changed meanwhile")
    shard.meta.record(ev.UserPasswordChanged(user.id, new_hash))


@handles("change_password")
def change_password(shard: ShardFace, session: Session, req: ChangePassword) -> Any:
    """Raises IggyError RESOURCE_NOT_FOUND, INVALID_CREDENTIALS (wrong current password)."""
    return _change_password(shard, session, req)


@handles("delete_user")
def delete_user(shard: ShardFace, session: Session, req: DeleteUser) -> Any:
    """Raises IggyError RESOURCE_NOT_FOUND, CANNOT_DELETE_USER (root)."""
    user = shard.meta.state.user(req.user_id)
    if user.id == ROOT_USER_ID:
        raise IggyError(ErrorCode.CANNOT_DELETE_USER, "the root user cannot be deleted")
    shard.meta.record(ev.UserDeleted(user.id))
    end_user_sessions(shard, user.id, keep_client_id=session.client_id)
    return None
