"""Fixtures for the official ``apache-iggy`` 0.8.0 client against a real lurcher server.

``client``: an ``IggyClient`` connected to the ``server`` fixture, logged in as iggy/iggy.
"""

from __future__ import annotations

import pytest_asyncio
from apache_iggy import IggyClient

from tests.support.official import connect_client
from tests.support.server import LurcherServer


@pytest_asyncio.fixture
async def client(server: LurcherServer) -> IggyClient:
    return await connect_client(server)
