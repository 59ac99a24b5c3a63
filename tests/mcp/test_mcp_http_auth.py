"""``http.auth_token`` on a real ``lurcher-mcp`` over streamable HTTP: a real MCP client
session with the Bearer token works; a request without it, or with another, is answered
401 before any tool runs (nothing reaches lurcher); ``/health`` stays open; the token can be
read from a file. Without the setting the endpoint answers anyone (the other MCP tests)."""

from __future__ import annotations

import httpx
from mcp.server.lowlevel import Server

from lurcher.mcp_server.config import HttpConfig
from lurcher.mcp_server.http_app import build_app
from tests.mcp.conftest import mcp_env, mcp_session

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "intruder", "version": "0"}}}
JSON_AND_SSE = {"accept": "application/json, text/event-stream"}


async def test_the_endpoint_needs_the_bearer_token(server, http_mcp_factory, sdk_client):
    url = http_mcp_factory(mcp_env(server, http_auth_token="s3cret-token")).url
    async with mcp_session("http", url, {"authorization": "Bearer s3cret-token"}) as mcp:
        created = await mcp.call("create_stream", name="behind-the-token")
        assert created["name"] == "behind-the-token"
    async with httpx.AsyncClient() as http:
        for given in ({}, {"authorization": "Bearer other"}, {"authorization": "s3cret-token"}):
            answer = await http.post(url, json={**INITIALIZE, "method": "tools/call"},
                                     headers={**JSON_AND_SSE, **given})
            assert answer.status_code == 401, (given, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"
        lower = await http.post(url, json=INITIALIZE,  # the scheme in any case (RFC 9110)
                                headers={**JSON_AND_SSE, "authorization": "bearer s3cret-token"})
        assert lower.status_code == 200, lower.text
        health = await http.get(url.rsplit("/", 1)[0] + "/health")
        assert health.status_code == 200
    assert [s.name for s in await sdk_client.get_streams()] == ["behind-the-token"]


async def test_the_token_can_come_from_a_file(server, http_mcp_factory, tmp_path):
    token_file = tmp_path / "mcp-token"
    token_file.write_text("from-a-file\n")
    url = http_mcp_factory(mcp_env(server, http_auth_token=f"file:{token_file}")).url
    async with mcp_session("http", url, {"authorization": "Bearer from-a-file"}) as mcp:
        assert (await mcp.call("ping")) is not None
    async with httpx.AsyncClient() as http:
        answer = await http.post(url, json=INITIALIZE, headers=JSON_AND_SSE)
        assert answer.status_code == 401


def test_an_open_endpoint_off_loopback_is_warned_about(caplog):
    build_app(Server("t"), HttpConfig(address="127.0.0.1:0"))
    build_app(Server("t"), HttpConfig(address="0.0.0.0:0", auth_token="t"))
    assert "auth_token" not in caplog.text
    build_app(Server("t"), HttpConfig(address="0.0.0.0:0"))
    assert "http.auth_token is not set: anyone who reaches 0.0.0.0:0" in caplog.text
