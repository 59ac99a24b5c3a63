"""The official apache-iggy 0.8.0 client against lurcher's users and tokens.

Users and tokens are created over raw TCP as root (the 0.8.0 Python API has no user or token
calls); the official client then logs in as a created user, with a personal access token in
a connection string, and sees the server's refusals under the names it knows.
"""

from __future__ import annotations

import asyncio

import pytest
from apache_iggy import IggyClient, SendMessage

from tests.support.server import LurcherServer
from tests.support.users import Perms, UserClient

TIMEOUT_S = 10


def root_client(server: LurcherServer) -> UserClient:
    client = UserClient(server.tcp_address)
    client.login_as("iggy", "iggy")
    return client


async def connected(address_or_string: str, from_string: bool = False) -> IggyClient:
    client = (IggyClient.from_connection_string(address_or_string) if from_string
              else IggyClient(address_or_string))
    await asyncio.wait_for(client.connect(), TIMEOUT_S)
    return client


async def test_login_as_created_user_and_permissions_apply(server: LurcherServer) -> None:
    with root_client(server) as root:
        root.create_user("writer", "writer-pw", Perms({"manage_streams"}))
        root.create_user("reader", "reader-pw", Perms({"read_streams"}))
    writer = await connected(server.tcp_address)
    await writer.login_user("writer", "writer-pw")
    await writer.create_stream("made-by-writer")
    await writer.create_topic("made-by-writer", "events", 1)

    reader = await connected(f"iggy://reader:reader-pw@{server.tcp_address}", from_string=True)
    stream = await reader.get_stream("made-by-writer")
    assert stream is not None and stream.name == "made-by-writer"
    with pytest.raises(RuntimeError, match="Unauthorized"):
        await reader.create_stream("made-by-reader")
    with pytest.raises(RuntimeError, match="Unauthorized"):
        await reader.send_messages("made-by-writer", "events", 0, [SendMessage(b"x")])


async def test_login_with_personal_access_token(server: LurcherServer) -> None:
    with root_client(server) as root:
        root.create_user("robot", "robot-pw", Perms({"manage_streams"}))
    with UserClient(server.tcp_address) as robot:
        robot.login_as("robot", "robot-pw")
        tokens = [robot.create_token(f"deploy-{i}") for i in range(3)]
    for i, token in enumerate(tokens):
        client = await connected(f"iggy+tcp://{token}@{server.tcp_address}", from_string=True)
        await client.create_stream(f"by-token-{i}")
        assert (await client.get_stream(f"by-token-{i}")) is not None


async def test_wrong_credentials_are_invalid_credentials(server: LurcherServer) -> None:
    with root_client(server) as root:
        root.create_user("someone", "right-pw")
    client = await connected(server.tcp_address)
    for username, password in (("someone", "wrong-pw"), ("nobody", "right-pw"), ("iggy", "iggy2")):
        with pytest.raises(RuntimeError, match="InvalidCredentials"):
            await client.login_user(username, password)
    await client.login_user("someone", "right-pw")
    await client.ping()
