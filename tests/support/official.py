"""Helpers around the official ``apache-iggy`` 0.8.0 Python client.

``connect_client(server)`` returns a connected (Ping sent) and, by default, logged-in
``IggyClient``. ``snapshot(message)`` freezes a ``ReceiveMessage`` into a comparable tuple.
The 0.8.0 client has no close(); one outliving its server only retries in the background.
"""

from __future__ import annotations

from typing import NamedTuple

from apache_iggy import IggyClient, ReceiveMessage

from tests.support.server import LurcherServer

ROOT_USERNAME = "iggy"
ROOT_PASSWORD = "iggy"


async def connect_client(server: LurcherServer, login: bool = True) -> IggyClient:
    """Connect to ``server``'s TCP address; log in as the default root user when ``login``."""
    client = IggyClient(server.tcp_address)
    await client.connect()
    if login:
        await client.login_user(ROOT_USERNAME, ROOT_PASSWORD)
    return client


class Snap(NamedTuple):
    """Everything the 0.8.0 Python API exposes about a polled message."""

    partition_id: int
    offset: int
    message_id: int
    timestamp: int
    checksum: int
    length: int
    payload: bytes


def snapshot(msg: ReceiveMessage) -> Snap:
    return Snap(msg.partition_id(), msg.offset(), msg.id(), msg.timestamp(), msg.checksum(),
                msg.length(), msg.payload())
