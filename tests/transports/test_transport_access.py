"""Issue 14, point 10, over every transport of the suite's real servers.

* A user without read rights gets the same answer for an existing stream/topic it may not
  read and for a missing one (41 both), so it cannot probe what exists (before: 41 for an
  existing one, empty OK for a missing one).
* Failed logins of one username are spaced out (defaults: 3 free failures, then 100 ms
  doubling): wrong passwords sent over fresh connections take at least the sum of the
  back-off, while another client keeps being answered and can still log in.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.values.permissions import (
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from lurcher.sdk.client import Client
from tests.support.server import LurcherServer
from tests.transports.conftest import CaFiles, make_client

_ids = itertools.count()
FREE_ATTEMPTS = 3  # configs/server.toml auth.login_free_attempts
BASE_S = 0.1  # auth.login_backoff_base


async def outcome(call) -> object:
    """The value of ``call`` or the Iggy code it raised (so answers can be compared)."""
    try:
        value = await call
    except IggyError as exc:
        return exc.code
    return "empty" if value is None else "found"


async def test_missing_and_forbidden_look_the_same(
        sdk_client: Client, transport_server: LurcherServer, transport_name: str,
        test_ca: CaFiles) -> None:
    n = next(_ids)
    mine, other = f"mine-{n}-{transport_name}", f"other-{n}-{transport_name}"
    for stream in (mine, other):
        await sdk_client.create_stream(stream)
        await sdk_client.create_topic(stream, "t1", 1)
        await sdk_client.create_topic(stream, "t2", 1)
    sid = (await sdk_client.get_stream(mine)).header.id
    grant = Permissions(streams={sid: StreamPermissions(
        topics={0: TopicPermissions(read_topic=True)})})
    username = f"reader{n}"
    await sdk_client.create_user(username, "secret", permissions=grant)
    user = make_client(transport_server, transport_name, test_ca,
                       username=username, password="secret")
    await user.connect()
    try:
        assert await outcome(user.get_topic(mine, "t1")) == "found"
        forbidden_stream = await outcome(user.get_stream(other))
        missing_stream = await outcome(user.get_stream(f"missing-{n}"))
        assert forbidden_stream == missing_stream == ErrorCode.UNAUTHORIZED
        forbidden_topic = await outcome(user.get_topic(mine, "t2"))
        missing_topic = await outcome(user.get_topic(mine, "t9"))
        assert forbidden_topic == missing_topic == ErrorCode.UNAUTHORIZED
        assert await outcome(user.get_topics(f"missing-{n}")) == await outcome(
            user.get_topics(other))
    finally:
        await user.close()


async def test_wrong_passwords_are_backed_off_per_user(
        transport_server: LurcherServer, transport_name: str, test_ca: CaFiles) -> None:
    victim = f"victim{next(_ids)}"
    attempts = FREE_ATTEMPTS + 4
    minimum_s = sum(BASE_S * 2 ** k for k in range(attempts - FREE_ATTEMPTS))

    async def guess() -> None:
        for _ in range(attempts):  # a fresh connection each time: per-user back-off
            client = make_client(transport_server, transport_name, test_ca)
            await client.connect()
            try:
                with pytest.raises(IggyError) as info:
                    await client.login_user(victim, "wrong-password")
                assert info.value.code == ErrorCode.INVALID_CREDENTIALS
            finally:
                await client.close()

    bystander = make_client(transport_server, transport_name, test_ca,
                            username="iggy", password="iggy")
    await bystander.connect()
    try:
        started = time.monotonic()
        guessing = asyncio.ensure_future(guess())
        answered = 0
        while not guessing.done():
            await bystander.ping()
            answered += 1
            await asyncio.sleep(0.05)
        await guessing
        elapsed = time.monotonic() - started
        assert elapsed >= minimum_s, f"{attempts} wrong logins took {elapsed:.2f} s"
        assert answered >= 2  # the other client was served meanwhile
        assert isinstance(await bystander.get_streams(), list)  # still logged in
    finally:
        await bystander.close()
