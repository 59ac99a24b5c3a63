"""The background producer under failure: a batch the server refuses discards the messages
queued behind it (so nothing is stored out of order), and the error says how many of the
messages given to ``send`` were not sent; messages given afterwards are sent."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.sdk import IggyError, Producer
from tests.sdk.conftest import messages_of

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
