"""``ClientSession``: the connection life cycle under every ``Client`` command.

Owns one ``Connection`` at a time, connects lazily on the first command, logs in
automatically when the config carries credentials (and again after every reconnect with
whatever login succeeded last), pings in the background every ``heartbeat_interval_s``,
and reconnects when the connection drops.

Retry rule (as the Iggy SDKs): a request that fails because the connection was lost, or
that is answered with Unauthenticated (40) while credentials are known, or with
Disconnected (8, the server's shutdown notice), is sent once more after a reconnect and
re-login. Any command: a create or delete whose reply was lost may so answer AlreadyExists
or NotFound although it took effect, and a send may be stored twice (same message ids).
Reconnect attempts go on while connecting fails (``reconnection_retries``, None:
for ever), but end at once when a connection was made and its login was refused or not
answered within ``request_timeout_s`` (a server that accepts but never answers gives
TASK_TIMEOUT, not an endless loop). A re-login the server refuses (password changed, user
deleted or deactivated) pauses the heartbeat (no refused login every beat; each call still
tries once), and a login command reconnects without the refused credentials, so
``login_user`` with the new ones works. Reconnects happen under one lock; a request that saw
an old connection fail does not reconnect again if another request already did. Non-zero
statuses become IggyError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.commands import decode_response
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.pat.login_with_personal_access_token import (
    LoginWithPersonalAccessToken,
)
from lurcher.core.wire.requests.system.ping import Ping
from lurcher.core.wire.requests.users.login_user import LoginUser
from lurcher.sdk.api.base import ApiBase
from lurcher.sdk.api.users import SDK_VERSION
from lurcher.sdk.arguments import command_name, encoded
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection import Connection, is_connection_lost, open_connection

log = logging.getLogger(__name__)

LOGIN_CODES = frozenset({LoginUser.CODE, LoginWithPersonalAccessToken.CODE})


def config_login(config: ClientConfig) -> Request | None:
    """The login request implied by the config's credentials (PAT first), or None."""
    if config.token is not None:
        return LoginWithPersonalAccessToken(config.token)
    if config.username is not None and config.password is not None:
        return LoginUser(config.username, config.password, SDK_VERSION, None)
    return None


class ClientSession(ApiBase):
    """Connection, login, heartbeat and reconnect; commands come from the API mixins."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._conn: Connection | None = None
        self._generation = 0
        self._reconnect_lock = asyncio.Lock()
        self._heartbeat: asyncio.Task[None] | None = None
        self._closed = False
        self._connected_at = 0.0
        self._login: Request | None = config_login(config)
        self._refused = False  # the last re-login with ``_login`` was refused

    # -- life cycle -------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.connected

    async def connect(self) -> None:
        """Connect (one attempt), log in if credentials are known, start the heartbeat.

        Raises IggyError CANNOT_ESTABLISH_CONNECTION / TASK_TIMEOUT, or the login error.
        """
        await self._connect(self._login)

    async def _connect(self, login: Request | None) -> None:
        if self._closed:
            raise IggyError(ErrorCode.NOT_CONNECTED, "client is closed")
        async with self._reconnect_lock:
            if not self.connected:
                await self._open(login)
        self._start_heartbeat()

    async def close(self) -> None:
        """Stop the heartbeat and close the connection; the client cannot be reused."""
        self._closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._heartbeat
            self._heartbeat = None
        if self._conn is not None:
            await self._conn.close()

    async def __aenter__(self) -> "ClientSession":
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _open(self, login: Request | None) -> None:
        """A new connection, logged in with ``login`` unless None. Raises IggyError."""
        await self._adopt(await self._new_connection(), login)

    async def _new_connection(self) -> Connection:
        """Raises IggyError CANNOT_ESTABLISH_CONNECTION / TASK_TIMEOUT."""
        conn = open_connection(self.config)
        await conn.connect()
        self._connected_at = time.monotonic()
        return conn

    async def _adopt(self, conn: Connection, login: Request | None) -> None:
        """Log ``conn`` in with ``login`` unless None and make it the current connection
        (it is closed when the login fails). Raises IggyError."""
        try:
            if login is not None:
                status, _ = await conn.request(login.CODE, login.encode())
                self._refused = bool(status)
                if status:
                    raise IggyError(status, f"{command_name(login.CODE)} after connect")
        except BaseException:
            await conn.close()
            raise
        old, self._conn = self._conn, conn
        self._generation += 1
        if old is not None:
            await old.close()

    # -- requests ---------------------------------------------------------------------------

    async def _call(self, request: Request) -> Any:
        body = await self._raw(request.CODE, [encoded(request)])
        return decode_response(request.CODE, body)

    async def _raw(self, code: int, parts: list[Buffer]) -> memoryview:
        login = None if code in LOGIN_CODES else self._login  # a login is its own
        conn, generation = await self._current(login)
        try:
            status, body = await conn.request(code, parts)
        except IggyError as e:
            if not (is_connection_lost(e) and self._reconnection_allowed()):
                raise
            await self._reconnect(generation, e, login)
            status, body = await self._conn.request(code, parts)
        else:
            if self._should_retry(code, status):
                await self._reconnect(generation, IggyError(status, command_name(code)), login)
                status, body = await self._conn.request(code, parts)
        if status:
            raise IggyError(status, command_name(code))
        if code in LOGIN_CODES:
            self._refused = False
        return body

    def _should_retry(self, code: int, status: int) -> bool:
        """Disconnected (8): the server dropped us, retry anything. Unauthenticated (40):
        retry after re-login, when a login is known and this is not a login itself."""
        if status == ErrorCode.DISCONNECTED:
            return self._reconnection_allowed()
        return (status == ErrorCode.UNAUTHENTICATED and code not in LOGIN_CODES
                and self._login is not None and self._reconnection_allowed())

    async def _current(self, login: Request | None) -> tuple[Connection, int]:
        """The connection to send on, (re)connected and logged in with ``login``."""
        if self._closed:
            raise IggyError(ErrorCode.NOT_CONNECTED, "client is closed")
        if self._conn is None:
            await self._connect(login)
        elif not self._conn.connected:
            if not self._reconnection_allowed():
                raise IggyError(ErrorCode.NOT_CONNECTED, "connection lost")
            await self._reconnect(self._generation, None, login)
        assert self._conn is not None
        return self._conn, self._generation

    def _reconnection_allowed(self) -> bool:
        cfg = self.config
        return not self._closed and cfg.reconnection_enabled and cfg.reconnection_retries != 0

    async def _reconnect(self, generation: int, cause: IggyError | None,
                         login: Request | None) -> None:
        """Replace the connection seen at ``generation`` unless another task already did.

        Raises the last IggyError once ``reconnection_retries`` attempts failed.
        """
        async with self._reconnect_lock:
            if self._generation != generation and self.connected:
                return
            if self._conn is not None:
                await self._conn.close()
            await self._retry_open(cause, login)

    async def _retry_open(self, cause: IggyError | None, login: Request | None) -> None:
        cfg = self.config
        attempt = 0
        while True:
            await self._wait_before_attempt(attempt)
            attempt += 1
            conn = None
            try:
                conn = await self._new_connection()
                await self._adopt(conn, login)
                log.info("reconnected to %s after %s", cfg.address, cause)
                return
            except IggyError as e:
                silent = conn is not None and e.code == ErrorCode.TASK_TIMEOUT
                if silent or not is_connection_lost(e) or (
                        cfg.reconnection_retries is not None
                        and attempt >= cfg.reconnection_retries):
                    raise
                log.debug("reconnect attempt %d to %s failed: %s", attempt, cfg.address, e)

    async def _wait_before_attempt(self, attempt: int) -> None:
        cfg = self.config
        delay = cfg.reconnection_interval_s if attempt else 0.0
        since = time.monotonic() - self._connected_at
        delay = max(delay, cfg.reestablish_after_s - since)
        if delay > 0:
            await asyncio.sleep(delay)
        if self._closed:
            raise IggyError(ErrorCode.NOT_CONNECTED, "client closed while reconnecting")

    # -- heartbeat --------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        interval = self.config.heartbeat_interval_s
        if interval and self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat(interval))

    async def _beat(self, interval_s: float) -> None:
        while not self._closed:
            await asyncio.sleep(interval_s)
            if self._refused:  # logging in again would be refused again: the next call tries
                continue
            try:
                await self._raw(Ping.CODE, [b""])
            except IggyError as e:
                log.debug("heartbeat to %s failed: %s", self.config.address, e)
