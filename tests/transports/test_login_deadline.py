"""The login deadline (``limits.login_timeout``) on every binary transport (TCP, WebSocket
and QUIC, plain and over TLS), on a real server: a connection that only pings is closed
once the deadline passes, as is one that logged out and stayed so; one that logged in in
time is served long after it. The server keeps serving new connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from lurcher.sdk.connection.base import is_connection_lost
from tests.support.server import LurcherServer
from tests.transports.conftest import ALL_ON, CaFiles, _serve, make_client, tls_env

DEADLINE = {"LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s"}
# past the deadline and its check (every quarter of it), with room for a slow machine
PAST_DEADLINE_S = 3.0
BINARY = {"plain": ["tcp", "ws", "quic"], "tls": ["tcp-tls", "ws-tls", "quic-ca"]}


@pytest.fixture(scope="module", params=list(BINARY))
def deadline_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                    test_ca: CaFiles) -> Iterator[tuple[str, LurcherServer]]:
    env = {**(tls_env(test_ca) if request.param == "tls" else ALL_ON), **DEADLINE}
    for server in _serve(tmp_path_factory.mktemp(request.param), env):
        yield request.param, server


async def _closed(request) -> None:
    """``request`` fails because the server closed the connection."""
    with pytest.raises(IggyError) as raised:
        await request
    assert is_connection_lost(raised.value), raised.value


@contextlib.asynccontextmanager
async def _connected(server: LurcherServer, name: str, ca: CaFiles,
                     **fields: object) -> AsyncIterator[Client]:
    client = make_client(server, name, ca, **fields)
    await client.connect()
    try:
        yield client
    finally:
        await client.close()


async def _pinging_only(server: LurcherServer, name: str, ca: CaFiles) -> None:
    async with _connected(server, name, ca) as client:
        await client.ping()
        await asyncio.sleep(PAST_DEADLINE_S)
        await _closed(client.ping())


async def _logged_out(server: LurcherServer, name: str, ca: CaFiles) -> None:
    async with _connected(server, name, ca) as client:
        await asyncio.sleep(PAST_DEADLINE_S)
        await _closed(client.login_user("iggy", "iggy"))  # too late
    async with _connected(server, name, ca, username="iggy", password="iggy") as client:
        await client.logout_user()
        await asyncio.sleep(PAST_DEADLINE_S)
        await _closed(client.ping())


async def _logged_in(server: LurcherServer, name: str, ca: CaFiles) -> None:
    async with _connected(server, name, ca, username="iggy", password="iggy") as client:
        await asyncio.sleep(PAST_DEADLINE_S)
        await client.ping()
        await client.get_me()  # needs the login, which is still valid


async def test_connections_must_log_in_in_time(deadline_server, test_ca: CaFiles) -> None:
    kind, server = deadline_server
    await asyncio.gather(*(check(server, name, test_ca) for name in BINARY[kind]
                           for check in (_pinging_only, _logged_out, _logged_in)))
    async with _connected(server, BINARY[kind][0], test_ca, username="iggy",
                          password="iggy") as client:
        await client.ping()
    log = server.log_tail(200_000)
    assert log.count("did not log in within 1 s: connection dropped") >= 3 * 3
    assert "Traceback" not in log
