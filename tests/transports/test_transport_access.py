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
import struct
import time

import httpx
import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.frames import encode_request
from lurcher.core.wire.requests.users.login_user import LoginUser
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


LOGIN_CODE = 38
GUESSING_S = 9.0  # 3 free failures, then 0.1 s doubling to the 5 s cap: about 6 s to fill


def login_frame(username: str, password: str) -> bytes:
    return encode_request(LOGIN_CODE, LoginUser(username, password).encode())


async def _raw_login(host: str, port: int, password: str, source: str, tries: int) -> list[int]:
    """``tries`` logins as iggy on one TCP connection from ``source``: their statuses."""
    reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
    statuses = []
    try:
        for _ in range(tries):
            writer.write(login_frame("iggy", password))
            status, length = struct.unpack("<II", await reader.readexactly(8))
            await reader.readexactly(length)
            statuses.append(status)
    finally:
        writer.close()
    return statuses


async def test_guesses_from_one_host_do_not_lock_the_user_out_of_another(
        plain_server: LurcherServer) -> None:
    """Found by an audit: two connections guessing root's password from one host (here
    127.0.0.2) made every correct login, from anywhere, answer InvalidCredentials unchecked
    while they kept on. The back-off of a username is now per client host."""
    host, port = plain_server.tcp_address.rsplit(":", 1)
    refused: list[int] = []

    async def guesser() -> None:
        deadline = time.monotonic() + GUESSING_S
        while time.monotonic() < deadline:
            refused.extend(await _raw_login(host, int(port), "wrong-password", "127.0.0.2", 3))

    guessing = [asyncio.ensure_future(guesser()) for _ in range(2)]
    # by then the two have pushed the username's next slot past login_backoff_max
    await asyncio.sleep(GUESSING_S - 2.5)
    answers = []
    async with httpx.AsyncClient(base_url=f"http://{plain_server.endpoints['http']}") as http:
        for _ in range(2):
            answers += await _raw_login(host, int(port), "iggy", "127.0.0.1", 1)
            r = await http.post("/users/login", json={"username": "iggy", "password": "iggy"})
            answers.append(0 if r.status_code == 200 else r.json()["id"])
            await asyncio.sleep(0.3)
    await asyncio.gather(*guessing)
    assert answers == [0] * 4
    assert set(refused) == {ErrorCode.INVALID_CREDENTIALS}
    assert "login refused unchecked" in plain_server.log_tail(200_000)  # the guesser was
