"""The client's idle polling (``idle_poll``, ``core.idle_poll``) against a real server: with
it on, the event loop polls while requests wait for answers that come fast; with it off
(0) the loop never polls, and the connection string sets it."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.core.idle_poll import for_loop
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk import Client
from lurcher.sdk.config import ClientConfig
from tests.sdk.conftest import root_connstring


async def pings_then_turns(client: Client, count: int = 20) -> int:
    """Poll callbacks this loop ran during ``count`` pings."""
    poller = for_loop(asyncio.get_running_loop())
    before = poller.turns
    for _ in range(count):
        await client.ping()
    return poller.turns - before


async def test_a_client_polls_while_its_fast_requests_wait_and_not_when_off(server):
    # 10 ms: the longest allowed, so a slow test machine still answers within it
    polling = Client.from_connection_string(root_connstring(server, idle_poll="10ms"),
                                            heartbeat_interval_s=None)
    quiet = Client.from_connection_string(root_connstring(server, idle_poll="0"),
                                          heartbeat_interval_s=None)
    assert polling.config.idle_poll_s == 0.01 and quiet.config.idle_poll_s == 0
    await polling.connect()
    await quiet.connect()
    try:
        await asyncio.sleep(0.02)  # let the connects' own polling end
        assert await pings_then_turns(quiet) == 0
        assert await pings_then_turns(polling) > 0
    finally:
        await polling.close()
        await quiet.close()


def test_the_default_polls_for_at_most_2_ms():
    assert ClientConfig().idle_poll_s == 0.002


@pytest.mark.parametrize("value", [-0.001, 0.011, float("nan")])
def test_an_idle_poll_out_of_range_is_refused(value):
    with pytest.raises(IggyError) as e:
        ClientConfig(idle_poll_s=value)
    assert e.value.code == ErrorCode.INVALID_CONFIGURATION and "idle_poll_s" in str(e.value)
