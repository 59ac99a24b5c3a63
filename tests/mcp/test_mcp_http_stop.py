"""lurcher-mcp over HTTP stops at SIGTERM while a real MCP client session is open: the
session's event stream (the GET a client keeps open for the server's messages) is ended,
and the process exits 0 at once. The stop waited for the agent to close the stream (for
ever, for a connected agent): the event streams end on uvicorn's exit hook, which the
signal handling of lurcher-mcp never called."""

from __future__ import annotations

import asyncio

from tests.mcp.conftest import MCP_STOP_TIMEOUT_S, mcp_env, mcp_session


async def test_sigterm_ends_open_sessions_and_exits_0(server, http_mcp_factory) -> None:
    mcp_server = http_mcp_factory(mcp_env(server))
    code = None
    try:
        async with mcp_session("http", mcp_server.url) as mcp:
            assert (await mcp.call("ping"))["ok"]
            code = await asyncio.to_thread(mcp_server.stop)
    except Exception:
        if code is None:  # failed before the stop; after it, the session ends with the server
            raise
    assert code == 0, f"not stopped within {MCP_STOP_TIMEOUT_S} s of SIGTERM (killed)"
