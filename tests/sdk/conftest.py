"""Fixtures for SDK tests: our ``Client`` connected to the shared ``server`` fixture
(tests/conftest.py), logged in as the default root user through a connection string.

``sdk_client``: connected, logged in, heartbeat off (tests stay deterministic).
``connstring``: the root connection string of the ``server`` fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
