"""The MCP server's HTTP sessions are bounded (``http.max_sessions``,
``http.session_idle_timeout_s``): a session beyond the count is refused 503 until one ends,
and a session with no request in flight is ended after the idle timeout (its id then gets
404). Sessions a client opened and abandoned were kept 30 minutes, up to 10,000 of them
(the MCP SDK's defaults, about 40 KB each), whatever the configuration."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.mcp.conftest import mcp_env, mcp_session

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "abandoner", "version": "0"}}}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
JSON_AND_SSE = {"accept": "application/json, text/event-stream"}
ENDED_WITHIN_S = 20.0


async def _open(http: httpx.AsyncClient, url: str) -> httpx.Response:
    return await http.post(url, json=INITIALIZE, headers=JSON_AND_SSE)


async def _status_once_ended(http: httpx.AsyncClient, url: str, session: str,
                             idle_s: float) -> int:
    """The status of a ping in ``session`` once it is no longer 200 (bounded wait); pings
    are ``2 * idle_s`` apart, as each one keeps the session busy for its time."""
    deadline = time.monotonic() + ENDED_WITHIN_S
    while True:
        await asyncio.sleep(2 * idle_s)
        answer = await http.post(url, json=PING,
                                 headers={**JSON_AND_SSE, "mcp-session-id": session})
        if answer.status_code != 200 or time.monotonic() > deadline:
            return answer.status_code


async def test_sessions_beyond_the_count_are_refused(server, http_mcp_factory) -> None:
    url = http_mcp_factory(mcp_env(server, http_max_sessions="2")).url
    async with httpx.AsyncClient(timeout=10) as http:
        opened = [await _open(http, url) for _ in range(2)]
        assert [a.status_code for a in opened] == [200, 200]
        refused = await _open(http, url)
        assert refused.status_code == 503, refused.text
        ended = await http.delete(url, headers={"mcp-session-id":
                                                opened[0].headers["mcp-session-id"]})
        assert ended.status_code == 200
    async with mcp_session("http", url) as mcp:
        assert (await mcp.call("ping"))["ok"]


async def test_an_idle_session_is_ended(server, http_mcp_factory) -> None:
    url = http_mcp_factory(mcp_env(server, http_session_idle_timeout_s="1")).url
    async with httpx.AsyncClient(timeout=10) as http:
        session = (await _open(http, url)).headers["mcp-session-id"]
        assert await _status_once_ended(http, url, session, 1.0) == 404
