"""The MCP server's HTTP listener has the server's read deadlines
(``http.header_timeout_s``, ``http.body_timeout_s``): a connection that sends nothing, or
trickles a request's header, is closed (408 when part of a request came) instead of being
held forever, and a real MCP session is served beside it."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from tests.mcp.conftest import mcp_env, mcp_session
from tests.support.trickle import trickle


async def _trickle(host: str, port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        return await trickle(reader, writer, data)
    finally:
        writer.close()


async def test_slow_requests_are_cut_and_sessions_served(server, http_mcp_factory) -> None:
    env = mcp_env(server, http_header_timeout_s="1", http_body_timeout_s="1")
    url = http_mcp_factory(env).url
    parts = urlsplit(url)
    header = f"POST {parts.path} HTTP/1.1\r\nHost: x\r\nX-Slow: ".encode() + b"a" * 200
    silent, trickled = await asyncio.gather(_trickle(parts.hostname, parts.port, b""),
                                            _trickle(parts.hostname, parts.port, header))
    assert silent == b""
    assert trickled.startswith(b"HTTP/1.1 408 "), trickled[:80]
    async with mcp_session("http", url) as mcp:
        assert await mcp.call("ping") is not None
