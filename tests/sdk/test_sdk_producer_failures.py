"""The background producer under failure: a batch the server refuses discards the messages
queued behind it (so nothing is stored out of order), and the error says how many of the
messages given to ``send`` were not sent; messages given afterwards are sent."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.sdk import Client, ErrorCode, IggyError, Producer
from tests.sdk.conftest import messages_of, raised_within

BAD_HEADERS = [b"\xff\xff\xff"]  # a user-headers block the server cannot parse


async def test_a_background_failure_counts_the_messages_it_discarded(sdk_client) -> None:
    producer = Producer(sdk_client, "bg", "t", partitioning=0, send_mode="background",
                        batch_length=1, max_in_flight=8, linger_time_s=0.001,
                        create_stream_if_missing=True, create_topic_if_missing=True)
    await producer.init()
    await producer.send([b"a"])
    await producer.send([b"bad"], headers=BAD_HEADERS)
    await producer.send([b"c"])
    await producer.send([b"d", b"e"])
    await asyncio.sleep(0.3)
    with pytest.raises(IggyError) as err:
        await producer.flush()
    notes = "".join(getattr(err.value, "__notes__", []))
    assert "4 of the messages given to send were not sent" in notes, notes
    await producer.send([b"f"])
    await producer.close()
    polled = messages_of(await sdk_client.poll_messages("bg", "t", 0, "first", 10))
    assert [m.payload for m in polled] == [b"a", b"f"]


async def _producer_facing_a_dead_server(server_factory) -> tuple[Client, Producer]:
    """A background producer with messages queued while its server is gone (the client
    reconnects for ever: reconnection_retries is unlimited)."""
    server = server_factory()
    client = Client.from_connection_string(
        f"iggy://iggy:iggy@{server.tcp_address}?reconnection_interval=50ms"
        "&heartbeat_interval=1h")
    producer = Producer(client, "dead", "t", partitioning=0, send_mode="background",
                        batch_length=2, max_in_flight=1, linger_time_s=0.001,
                        create_stream_if_missing=True, create_topic_if_missing=True)
    await producer.init()
    server.kill()
    for i in range(3):
        await producer.send([b"%d" % i])
    return client, producer


async def test_close_with_a_timeout_ends_while_the_server_is_down(server_factory) -> None:
    client, producer = await _producer_facing_a_dead_server(server_factory)
    error = await raised_within(producer.close(timeout_s=0.3))
    assert isinstance(error, IggyError) and error.code == ErrorCode.TASK_TIMEOUT
    assert "3 of the messages given to send were not sent" in "".join(error.__notes__)
    assert producer._sender is None
    await client.close()


async def test_a_close_cancelled_by_wait_for_ends(server_factory) -> None:
    """Cancelling close (asyncio.wait_for) stops the sender instead of waiting for a free
    place in its queue, which a sender stuck reconnecting never makes."""
    client, producer = await _producer_facing_a_dead_server(server_factory)
    error = await raised_within(asyncio.wait_for(producer.close(), 0.3))
    assert isinstance(error, asyncio.TimeoutError)
    await client.close()
