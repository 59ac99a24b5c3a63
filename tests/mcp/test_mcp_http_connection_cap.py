"""The MCP server's HTTP listener has a connection cap (``http.max_connections``, at most a
quarter of the open-files limit), as the server's listeners do: a connection beyond it is
answered 503 and closed, and once the idle ones are gone a real MCP session is served.

The listener took every connection the kernel handed it, each held until
``http.header_timeout_s``: 200 idle connections to a ``lurcher-mcp`` under a limit of 128
open files left a new MCP session hanging (its connections could not be accepted). Every
read below is bounded so a regression fails instead of hanging.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from urllib.parse import urlsplit

import httpx

from tests.mcp.conftest import mcp_env, mcp_session
from tests.support.idle import answer_until_closed, idle_connections

CAP = 4
READ_S = 10.0
SERVED_WITHIN_S = 10.0


def _health_once_served(url: str) -> int:
    """The status of GET /health once the listener serves again (bounded wait)."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    with httpx.Client(timeout=READ_S) as http:
        while True:
            status = http.get(url).status_code
            if status == 200 or time.monotonic() > deadline:
                return status


async def test_a_connection_beyond_the_cap_is_answered_503(server, http_mcp_factory) -> None:
    mcp_server = http_mcp_factory(mcp_env(server, http_max_connections=str(CAP),
                                          http_header_timeout_s="5"))
    parts = urlsplit(mcp_server.url)
    with ExitStack() as stack:
        idle_connections(stack, parts.hostname, parts.port, CAP, READ_S)
        beyond = idle_connections(stack, parts.hostname, parts.port, 1, READ_S)[0]
        answer = answer_until_closed(beyond)
    assert answer.startswith(b"HTTP/1.1 503 "), answer
    assert answer.endswith(b"too many connections")
    health = f"{parts.scheme}://{parts.netloc}/health"
    assert _health_once_served(health) == 200
    async with mcp_session("http", mcp_server.url) as mcp:
        assert (await mcp.call("ping"))["ok"]
    log = mcp_server.log_path.read_text()
    assert log.count(f"MCP over HTTP: {CAP} connections open (http.max_connections") == 1
    assert "Traceback" not in log
