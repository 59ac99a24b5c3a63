"""The permission gate of lurcher-mcp, and lurcher's own permissions seen through it."""

from __future__ import annotations

from lurcher.core.wire.values.permissions import GlobalPermissions, Permissions
from lurcher.sdk import Client, ErrorCode
from tests.mcp.conftest import mcp_session

READ_ONLY = Permissions(GlobalPermissions(
    read_servers=True, read_users=True, read_streams=True, read_topics=True,
    poll_messages=True))


async def test_disabled_create_never_reaches_lurcher(mcp_target, sdk_client: Client) -> None:
    async with mcp_session(*mcp_target(permissions_create="false")) as mcp:
        message, data = await mcp.call_error("create_stream", name="forbidden")
        assert data == {"error": message, "kind": "permission_gate", "access": "create"}
        assert "'create'" in message
        await mcp.call_error("send_messages", stream_id=1, topic_id=1,
                             messages=[{"payload": "x"}])
        assert (await mcp.call("get_streams"))["count"] == 0  # reads still pass
    assert await sdk_client.get_stream("forbidden") is None
    assert await sdk_client.get_streams() == []


async def test_disabled_read_refuses_tools_and_resources(mcp_target) -> None:
    async with mcp_session(*mcp_target(permissions_read="false")) as mcp:
        _, data = await mcp.call_error("get_streams")
        assert data["access"] == "read"
        try:
            await mcp.read("lurcher://streams")
        except Exception as e:  # an MCP error answer, the session keeps working
            assert "'read'" in str(e)
        else:
            raise AssertionError("resource read was not refused")
        assert (await mcp.call("create_stream", name="allowed"))["name"] == "allowed"


async def test_read_only_user_gets_unauthorized(mcp_target, sdk_client: Client) -> None:
    await sdk_client.create_user("reader", "reader-secret", permissions=READ_ONLY)
    await sdk_client.create_stream("existing")
    target = mcp_target(iggy_username="reader", iggy_password="reader-secret")
    async with mcp_session(*target) as mcp:
        assert (await mcp.call("get_streams"))["streams"][0]["name"] == "existing"
        message, data = await mcp.call_error("create_stream", name="not-allowed")
        assert data["kind"] == "iggy_error"
        assert data["code"] == ErrorCode.UNAUTHORIZED == 41
        assert data["name"] == "Unauthorized" and "Unauthorized" in message
    assert await sdk_client.get_stream("not-allowed") is None
