"""The MCP server's HTTP listener has the server's read deadlines
(``http.header_timeout_s``, ``http.body_timeout_s``, ``http.body_min_rate``): a connection
that sends nothing, trickles a request's header, or drips a body a byte just inside the
body timeout, is closed (408 when part of a request came) instead of being held forever,
and a real MCP session is served beside it."""

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


def _post(host: str, port: int, path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream"
            f"\r\nContent-Length: {length}\r\n\r\n").encode()


async def _drip(host: str, port: int, head: bytes, body: bytes) -> bytes:
    """``head`` at once, then ``body`` a byte every 0.9 s: inside the 1 s body timeout,
    below the 2 bytes a second of the least rate."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(head)
        return await trickle(reader, writer, body, pace_s=0.9)
    finally:
        writer.close()


async def test_slow_requests_are_cut_and_sessions_served(server, http_mcp_factory) -> None:
    env = mcp_env(server, http_header_timeout_s="1", http_body_timeout_s="1",
                  http_body_min_rate="2")
    url = http_mcp_factory(env).url
    parts = urlsplit(url)
    header = f"POST {parts.path} HTTP/1.1\r\nHost: x\r\nX-Slow: ".encode() + b"a" * 200
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}'  # 45 s at 0.9 s a byte
    silent, trickled, dripped = await asyncio.gather(
        _trickle(parts.hostname, parts.port, b""),
        _trickle(parts.hostname, parts.port, header),
        _drip(parts.hostname, parts.port, _post(parts.hostname, parts.port, parts.path, len(body)), body))
    assert silent == b""
    assert trickled.startswith(b"HTTP/1.1 408 "), trickled[:80]
    assert dripped.startswith(b"HTTP/1.1 408 "), dripped[:80]
    async with mcp_session("http", url) as mcp:
        assert await mcp.call("ping") is not None
