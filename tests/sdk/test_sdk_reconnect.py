"""Connection life cycle: reconnect with re-login after a restart or crash, retry once on
Unauthenticated (40), bounded reconnection attempts, heartbeat pings."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.sdk import Client, ErrorCode, IggyError
from lurcher.sdk.connection.base import Connection
from tests.sdk.conftest import raised_within
from tests.support import raw
from tests.support.cluster import eventually
from tests.support.server import free_ports




@pytest.fixture
def fixed_server(server_factory):
    """A server on a fixed port, so a restart comes back at the same address."""
    return server_factory({"LURCHER_TCP_ADDRESS": f"127.0.0.1:{free_ports(1)[0]}"})


def client_for(server, **options: str) -> Client:
    query = "&".join(f"{k}={v}" for k, v in {"reconnection_interval": "100ms",
                                            "heartbeat_interval": "1h", **options}.items())
    return Client.from_connection_string(f"iggy://iggy:iggy@{server.tcp_address}?{query}")


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
async def test_request_after_restart_reconnects_and_logs_in(fixed_server, crash: bool) -> None:
    async with client_for(fixed_server) as client:
        await client.create_stream("survives")
        first = (await client.get_me()).header.address
        fixed_server.restart(crash=crash)
        assert [s.name for s in await client.get_streams()] == ["survives"]
        me = await client.get_me()
        assert me.header.user_id == 0 and me.header.address != first


async def test_unauthenticated_is_retried_once_after_relogin(sdk_client: Client) -> None:
    await sdk_client._raw(39, [b""])  # log the session out behind the client's back
    assert await sdk_client.get_streams() == []  # 40 -> reconnect, re-login, retry


async def test_reconnection_gives_up_after_the_configured_attempts(fixed_server) -> None:
    async with client_for(fixed_server, reconnection_retries="2") as client:
        await client.ping()
        fixed_server.kill()
        with pytest.raises(IggyError) as err:
            await client.get_streams()
        assert err.value.code in (ErrorCode.CANNOT_ESTABLISH_CONNECTION, ErrorCode.CONNECTION_CLOSED)


async def test_no_reconnect_when_disabled(fixed_server) -> None:
    async with client_for(fixed_server, reconnection_retries="0") as client:
        await client.ping()
        fixed_server.restart()
        with pytest.raises(IggyError) as err:
            await client.get_streams()
        assert err.value.code in (ErrorCode.NOT_CONNECTED, ErrorCode.DISCONNECTED,
                                  ErrorCode.CONNECTION_CLOSED)


async def test_heartbeat_pings_in_the_background(server, monkeypatch) -> None:
    codes: list[int] = []
    original = Connection.request

    async def counting(self, code, payload=b""):
        codes.append(code)
        return await original(self, code, payload)

    monkeypatch.setattr(Connection, "request", counting)

    async def three_pings() -> bool:
        return codes.count(raw.PING) >= 3

    async with client_for(server, heartbeat_interval="50ms") as client:
        await eventually(three_pings, "three heartbeat pings while the client is idle")
        await client.get_streams()
    count = len(codes)
    await asyncio.sleep(0.2)
    assert len(codes) == count, "heartbeat must stop on close"


async def test_connect_failure_is_an_iggy_error() -> None:
    client = Client(f"127.0.0.1:{free_ports(1)[0]}", heartbeat_interval_s=None)
    with pytest.raises(IggyError) as err:
        await client.connect()
    assert err.value.code == ErrorCode.CANNOT_ESTABLISH_CONNECTION


@pytest.mark.parametrize("how", ["connection-drop", "server-restart"])
async def test_group_consumer_rejoins_after_reconnect(fixed_server, how: str) -> None:
    from lurcher.sdk import Consumer

    async with client_for(fixed_server) as client:
        await client.create_stream("rj")
        await client.create_topic("rj", "t", 2)
        for p in range(2):
            await client.send_messages("rj", "t", [b"%d-%d" % (p, i) for i in range(50)], p)
        seen = []
        async with Consumer(client, "rj", "t", "grp", batch_length=10,
                            auto_commit="each_batch", poll_interval_s=0.01) as consumer:
            async for m in consumer:
                seen.append(m.payload)
                if len(seen) == 35:
                    break
            if how == "connection-drop":
                await client._conn.close()
            else:
                fixed_server.restart()
            async for m in consumer:
                seen.append(m.payload)
                if len(set(seen)) == 100:
                    break
        assert set(seen) == {b"%d-%d" % (p, i) for p in range(2) for i in range(50)}
        assert len(seen) - len(set(seen)) <= 10, "at most the uncommitted batch again"


async def _user_client(sdk_client: Client, server, **options: str) -> tuple[Client, int]:
    """A client logged in as a new root user ``user1`` (password ``first-pw``)."""
    from lurcher.sdk import Permissions

    user = await sdk_client.create_user("user1", "first-pw", "active", Permissions.root())
    query = "&".join(f"{k}={v}" for k, v in {"reconnection_interval": "10ms",
                                            "heartbeat_interval": "1h", **options}.items())
    client = Client.from_connection_string(
        f"iggy://user1:first-pw@{server.tcp_address}?{query}")
    await client.connect()
    return client, user.header.id


async def test_login_with_the_new_password_after_the_old_one_is_refused(sdk_client,
                                                                      server) -> None:
    """After a password change and a lost connection the re-login is refused; login_user
    with the new password then works (it reconnected with the old one first and was
    refused again, for ever)."""
    client, uid = await _user_client(sdk_client, server)
    try:
        await sdk_client.change_password(uid, "first-pw", "second-pw")
        await client._conn.close()
        with pytest.raises(IggyError) as err:
            await client.get_streams()
        assert err.value.code == ErrorCode.INVALID_CREDENTIALS
        assert (await client.login_user("user1", "second-pw")).user_id == uid
        assert await client.get_streams() == []
        await client._conn.close()  # the new password is the one used to log in again
        assert await client.get_streams() == []
    finally:
        await client.close()


async def test_heartbeat_pauses_while_the_re_login_is_refused(sdk_client, server,
                                                             monkeypatch) -> None:
    """A deleted user: the heartbeat's reconnect is refused once, then it stops logging in
    at every beat (each one cost the server a password hash); a call still tries."""
    logins: list[int] = []
    original = Connection.request

    async def counting(self, code, payload=b""):
        if code == 38:
            logins.append(code)
        return await original(self, code, payload)

    client, uid = await _user_client(sdk_client, server, heartbeat_interval="20ms")
    try:
        monkeypatch.setattr(Connection, "request", counting)
        await sdk_client.delete_user(uid)
        await client._conn.close()
        await asyncio.sleep(0.5)
        assert len(logins) == 1, "the heartbeat logs in again at every beat"
        with pytest.raises(IggyError) as err:
            await client.get_streams()
        assert err.value.code == ErrorCode.INVALID_CREDENTIALS
        assert len(logins) == 2
    finally:
        await client.close()


@pytest.mark.parametrize("retries,attempts", [("0", 0), ("2", 2)])
async def test_http_retries_bound_the_reconnects(server_factory, monkeypatch, retries: str,
                                                 attempts: int) -> None:
    """``iggy+http://...?retries=N`` is HTTP's reconnection_retries: a call whose server is
    gone reconnects N times, then fails (the option was parsed and never read: the client
    reconnected for ever)."""
    server = server_factory({"LURCHER_HTTP_ENABLED": "true",
                             "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"})
    client = Client.from_connection_string(
        f"iggy+http://iggy:iggy@{server.endpoints['http']}?retries={retries}"
        "&heartbeat_interval=1h", reconnection_interval_s=0.05)
    tries: list[int] = []
    original = client._new_connection

    async def counted():
        tries.append(1)
        return await original()

    try:
        await client.ping()
        monkeypatch.setattr(client, "_new_connection", counted)
        server.kill()
        error = await raised_within(client.get_streams())
        assert isinstance(error, IggyError) and error.code in (
            ErrorCode.CANNOT_ESTABLISH_CONNECTION, ErrorCode.CONNECTION_CLOSED)
        assert len(tries) == attempts
    finally:
        await client.close()
