"""Fixtures for MCP tests: a real ``lurcher-server`` (the ``server`` fixture), ``lurcher-mcp``
spawned as a subprocess over stdio or streamable HTTP, and a real ``mcp.ClientSession``.

``mcp_session(transport, env)``: an async context manager yielding an initialized
``McpSession`` (use it inside the test body, so anyio scopes open and close in one task).
``mcp_env(server, **overrides)``: ``LURCHER_MCP_*`` variables pointing at ``server``.
``http_mcp``: starts ``python -m lurcher.mcp_server`` over HTTP on port 0 and returns its URL
(stopped with SIGTERM at teardown). ``sdk_client``: our SDK client as root.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from lurcher.sdk import Client
from tests.support.server import REPO_ROOT, LurcherServer

MCP_START_TIMEOUT_S = 60.0
MCP_STOP_TIMEOUT_S = 15.0
URL_LINE = re.compile(r"serving MCP over http at (\S+)")


def mcp_env(server: LurcherServer, **overrides: str) -> dict[str, str]:
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH"))
                                      if p),
        "LURCHER_MCP_IGGY_ADDRESS": server.tcp_address,
        "LURCHER_MCP_IGGY_USERNAME": "iggy",
        "LURCHER_MCP_IGGY_PASSWORD": "iggy",
    }
    env.update({f"LURCHER_MCP_{k.upper()}": v for k, v in overrides.items()})
    return env


class McpSession:
    """A thin helper over ``ClientSession``: tool calls decoded from their JSON text."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> Any:
        """The tool's JSON result; fails the test on a tool error."""
        result = await self.session.call_tool(tool, arguments)
        assert not result.is_error, f"{tool} failed: {result.content[0].text}"
        return json.loads(result.content[0].text)

    async def call_error(self, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
        """The message and structured error of a call that must fail."""
        result = await self.session.call_tool(tool, arguments)
        assert result.is_error, f"{tool} unexpectedly succeeded: {result.content[0].text}"
        return result.content[0].text, result.structured_content

    async def read(self, uri: str) -> Any:
        contents = (await self.session.read_resource(uri)).contents
        return json.loads(contents[0].text)


@contextlib.asynccontextmanager
async def mcp_session(transport: str, target: dict[str, str] | str,
                      headers: dict[str, str] | None = None,
                      ca_file: Path | None = None) -> AsyncIterator[McpSession]:
    """``transport`` "stdio" (``target`` is the env of the spawned server) or "http"
    (``target`` is the endpoint URL; ``headers`` go with every request; an https one's
    certificate is checked against ``ca_file`` when given)."""
    async with contextlib.AsyncExitStack() as stack:
        if transport == "stdio":
            env = {**target, "LURCHER_MCP_TRANSPORT": "stdio"}
            params = StdioServerParameters(command=sys.executable,
                                           args=["-m", "lurcher.mcp_server"], env=env)
            streams = stdio_client(params)
        else:
            client = create_mcp_http_client(headers=headers)
            if ca_file is not None:
                client = httpx2.AsyncClient(verify=ssl.create_default_context(cafile=ca_file),
                                            headers=headers, timeout=client.timeout)
            client = await stack.enter_async_context(client)
            streams = streamable_http_client(target, http_client=client)
        read, write = await stack.enter_async_context(streams)
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield McpSession(session)


class HttpMcp:
    """One ``lurcher-mcp`` process serving streamable HTTP."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        full_env = {**os.environ, **env, "LURCHER_MCP_TRANSPORT": "http",
                    "LURCHER_MCP_HTTP_ADDRESS": "127.0.0.1:0"}
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lurcher.mcp_server"], env=full_env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.url = self._wait_url()

    def _wait_url(self) -> str:
        deadline = time.monotonic() + MCP_START_TIMEOUT_S
        while time.monotonic() < deadline:
            m = URL_LINE.search(self.log_path.read_text(errors="replace"))
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"lurcher-mcp did not start:\n{self.log_path.read_text()}")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(MCP_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def http_mcp_factory(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], HttpMcp]]:
    started: list[HttpMcp] = []

    def start(env: dict[str, str]) -> HttpMcp:
        started.append(HttpMcp(env, tmp_path / f"mcp-{len(started)}.txt"))
        return started[-1]

    yield start
    codes = [mcp.stop() for mcp in started]
    assert all(code == 0 for code in codes), f"lurcher-mcp exit codes {codes}"


@pytest_asyncio.fixture
async def sdk_client(server: LurcherServer) -> AsyncIterator[Client]:
    client = Client(server.tcp_address, username="iggy", password="iggy",
                    heartbeat_interval_s=None)
    await client.connect()
    yield client
    await client.close()


@pytest.fixture(params=["stdio", "http"])
def mcp_target(request: pytest.FixtureRequest, server: LurcherServer,
               http_mcp_factory: Callable[[dict[str, str]], HttpMcp]
               ) -> Callable[..., tuple[str, dict[str, str] | str]]:
    """``mcp_target(**overrides)`` -> (transport, target) for ``mcp_session``, over both
    transports (an HTTP server is started per call)."""
    def make(**overrides: str) -> tuple[str, dict[str, str] | str]:
        env = mcp_env(server, **overrides)
        if request.param == "stdio":
            return "stdio", env
        return "http", http_mcp_factory(env).url
    return make
