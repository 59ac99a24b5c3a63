"""Fixtures for SDK tests: our ``Client`` connected to the shared ``server`` fixture
(tests/conftest.py), logged in as the default root user through a connection string.

``sdk_client``: connected, logged in, heartbeat off (tests stay deterministic).
``connstring``: the root connection string of the ``server`` fixture.
``expect_command``: runs a coroutine; if the server answers InvalidCommand (3) for that
code — a command the server does not implement yet — the test is marked xfail with the
command's name, so the gap is reported instead of hidden.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from lurcher.sdk import Client, ErrorCode, IggyError
from tests.support.server import LurcherServer

T = TypeVar("T")


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


async def expect_command(awaitable: Awaitable[T]) -> T:
    """Await; xfail the test when the server does not implement the command (status 3)."""
    try:
        return await awaitable
    except IggyError as e:
        if e.code == ErrorCode.INVALID_COMMAND:
            pytest.xfail(f"server answers InvalidCommand (3): {e}")
        raise


def messages_of(polled: Any) -> list:
    return list(polled.messages())
