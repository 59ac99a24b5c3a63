"""The MCP server's HTTP endpoint bounds a request body (``http.max_request_bytes``, 4 MiB
by default, the MCP SDK's): a bigger one is answered 413 with a JSON-RPC error naming the
key, which a real MCP client session shows as the call's error (a bare 413 read "Server
returned an error response"); nothing is sent to lurcher and the session goes on."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import mcp_env, mcp_session

DEFAULT_LIMIT = 4 * 1024 * 1024


@pytest.mark.parametrize("configured", [65_536, None])
async def test_a_body_above_the_limit_is_refused_naming_it(server, http_mcp_factory,
                                                           configured) -> None:
    keys = {"http_max_request_bytes": str(configured)} if configured else {}
    url = http_mcp_factory(mcp_env(server, **keys)).url
    limit = configured or DEFAULT_LIMIT
    async with mcp_session("http", url) as mcp:
        await mcp.call("create_stream", name="s")
        await mcp.call("create_topic", stream_id="s", name="t")
        with pytest.raises(MCPError) as caught:
            await mcp.session.call_tool("send_messages", {
                "stream_id": "s", "topic_id": "t", "messages": [{"payload": "x" * limit}]})
        assert f"request body above {limit} bytes" in caught.value.error.message
        assert "http.max_request_bytes" in caught.value.error.message
        within = await mcp.call("send_messages", stream_id="s", topic_id="t",
                                messages=[{"payload": "x" * (limit // 2)}])
        assert within["messages_count"] == 1
        polled = await mcp.call("poll_messages", stream_id="s", topic_id="t", partition_id=0,
                                strategy="first", count=10)
        assert [m["payload_bytes"] for m in polled["messages"]] == [limit // 2]
