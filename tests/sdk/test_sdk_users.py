"""Users, permissions, passwords and personal access tokens through the SDK."""

from __future__ import annotations

import pytest

from lurcher.sdk import Client, ErrorCode, GlobalPermissions, IggyError, Permissions


async def test_user_crud_permissions_and_password(sdk_client: Client, server) -> None:
    perms = Permissions(GlobalPermissions(read_streams=True, read_topics=True))
    user = await sdk_client.create_user("alice", "secret1", "active", perms)
    assert user.header.username == "alice" and user.permissions == perms
    uid = user.header.id
    assert {u.username for u in await sdk_client.get_users()} >= {"iggy", "alice"}
    got = await sdk_client.get_user("alice")
    assert got.header.id == uid
    assert await sdk_client.get_user("nobody") is None
    await sdk_client.update_user(uid, username="alice2", status="inactive")
    got = await sdk_client.get_user(uid)
    assert (got.header.username, got.header.status) == ("alice2", 2)
    await sdk_client.update_user(uid, status="active")
    await sdk_client.update_permissions(uid, Permissions.root())
    assert (await sdk_client.get_user(uid)).permissions == Permissions.root()
    await sdk_client.change_password(uid, "secret1", "secret2")
    other = Client(server.tcp_address, heartbeat_interval_s=None)
    try:
        with pytest.raises(IggyError) as err:
            await other.login_user("alice2", "secret1")
        assert err.value.code == ErrorCode.INVALID_CREDENTIALS
        assert (await other.login_user("alice2", "secret2")).user_id == uid
    finally:
        await other.close()
    await sdk_client.delete_user(uid)
    assert await sdk_client.get_user(uid) is None


async def test_personal_access_tokens(sdk_client: Client, server) -> None:
    token = await sdk_client.create_personal_access_token("tok-1")
    assert token
    names = [t.name for t in await sdk_client.get_personal_access_tokens()]
    assert names == ["tok-1"]
    via_string = Client.from_connection_string(f"iggy+tcp://{token}@{server.tcp_address}",
                                               heartbeat_interval_s=None)
    try:
        await via_string.connect()  # logs in with the token
        assert (await via_string.get_me()).header.user_id == 0
    finally:
        await via_string.close()
    other = Client(server.tcp_address, heartbeat_interval_s=None)
    try:
        assert (await other.login_with_personal_access_token(token)).user_id == 0
        await sdk_client.delete_personal_access_token("tok-1")
        with pytest.raises(IggyError) as err:
            await other.login_with_personal_access_token(token)
        assert err.value.code == ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN
    finally:
        await other.close()
    assert await sdk_client.get_personal_access_tokens() == []
