"""lurcher-mcp over HTTP with no descriptor left to accept with: connections that arrive
meanwhile are not served (there is nothing to serve them with), the log says so without a
flood, and once descriptors are free again a real MCP session is served and the process
stops cleanly.

On asyncio's own loop every refused accept logged "socket.accept() out of system resource"
with a traceback, up to the listen backlog (2,048) times for one burst, each scheduling a
retry that at stop logged "Invalid file descriptor: -1" with another traceback.
"""

from __future__ import annotations

import os
import resource
import socket
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

from tests.mcp.conftest import mcp_env, mcp_session

BURST = 200
OPEN_FILES = 1024
SETTLE_S = 2.0


def _hold_descriptors(pid: int) -> None:
    """Lower ``pid``'s soft open-files limit to its lowest free descriptor: every accept
    (and open) fails with EMFILE until ``_release_descriptors``."""
    open_now = {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}
    lowest_free = next(n for n in range(len(open_now) + 1) if n not in open_now)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, OPEN_FILES))


def _release_descriptors(pid: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


async def test_a_burst_with_no_descriptor_left_is_not_a_log_flood(server, http_mcp_factory
                                                                   ) -> None:
    mcp_server = http_mcp_factory(mcp_env(server))
    parts = urlsplit(mcp_server.url)
    pid = mcp_server.proc.pid
    with ExitStack() as stack:
        _hold_descriptors(pid)
        try:
            for _ in range(BURST):
                sock = stack.enter_context(socket.create_connection(
                    (parts.hostname, parts.port), timeout=5))
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(SETTLE_S)  # let the listener meet the burst (not an assertion)
        finally:
            _release_descriptors(pid)
    async with mcp_session("http", mcp_server.url) as mcp:
        assert (await mcp.call("ping"))["ok"]
    assert mcp_server.stop() == 0
    log = mcp_server.log_path.read_text()
    assert log.count("Traceback") == 0, log[-3000:]
    assert log.count("out of system resource") <= 1, log.count("out of system resource")
