"""Fixtures for SDK tests: our ``Client`` connected to the shared ``server`` fixture
(tests/conftest.py), logged in as the default root user through a connection string.

``sdk_client``: connected, logged in, heartbeat off (tests stay deterministic).
``connstring``: the root connection string of the ``server`` fixture.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
import pytest_asyncio

from lurcher.sdk import Client
from tests.support.server import LurcherServer

def root_connstring(server: LurcherServer, **options: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"iggy://iggy:iggy@{server.tcp_address}" + (f"?{query}" if query else "")


@pytest.fixture
def connstring(server: LurcherServer) -> str:
    return root_connstring(server)


@pytest_asyncio.fixture
async def sdk_client(server: LurcherServer) -> AsyncIterator[Client]:
    client = Client.from_connection_string(root_connstring(server), heartbeat_interval_s=None)
    await client.connect()
    yield client
    await client.close()


def messages_of(polled: Any) -> list:
    return list(polled.messages())


async def raised_within(awaitable: Awaitable[Any], seconds: float = 10.0) -> BaseException:
    """The exception ``awaitable`` ends with; fails the test when it is still running after
    ``seconds`` or ends without one."""
    task = asyncio.ensure_future(awaitable)
    await asyncio.wait({task}, timeout=seconds)
    assert task.done(), f"still waiting after {seconds}s"
    error = task.exception()
    assert error is not None, f"ended with {task.result()!r}, not an exception"
    return error
